package cleanup

// The cleanup controller reads cleanup policies and writes their status,
// discovers what it may delete (CRDs, SelfSubjectAccessReviews), holds its
// Lease and writes events. What it deletes is granted separately, per
// kind, by ClusterRoles aggregated to it: only kinds it may list, watch and
// delete cluster-wide get a TTL informer.
//
// +kubebuilder:rbac:groups=kyverno.io,resources=cleanuppolicies;clustercleanuppolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=kyverno.io,resources=cleanuppolicies/status;clustercleanuppolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=selfsubjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;update
