package cleanup

// The cleanup controller's permissions: `make manifests` generates them
// into config/rbac/cleanup/role.yaml for the charter-cleanup
// ServiceAccount. What it deletes is not listed here: cleanup policies
// and TTL labels act on the kinds granted to the aggregated ClusterRole
// charter-cleanup-aggregate, which gathers every ClusterRole labelled
// rbac.charter.dev/aggregate-to-cleanup: "true" (list, watch and delete;
// charter ships none), so an operator decides what may be cleaned up. The
// TTL controller watches only kinds it may list, watch and delete
// cluster-wide, and asks the API server which those are. A namespaced
// CleanupPolicy or NamespacedDeletingPolicy lists and deletes as the
// ServiceAccount --namespaced-policy-service-account of its namespace
// (config/rbac/cleanup/impersonate.yaml), never with charter's rights.
// One marker per reason; the comment above each says why.
//
// get: a missing ServiceAccount of a namespaced policy fails its run
// naming it.
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
//
// get;list;watch: cleanup policies are read from the shared informers
// (clusterstate).
// +kubebuilder:rbac:groups=kyverno.io,resources=cleanuppolicies;clustercleanuppolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policies.kyverno.io,resources=deletingpolicies;namespaceddeletingpolicies,verbs=get;list;watch
// get;update;patch: a policy's lastExecutionTime and Ready/Stalled go to
// its status.
// +kubebuilder:rbac:groups=kyverno.io,resources=cleanuppolicies/status;clustercleanuppolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=policies.kyverno.io,resources=deletingpolicies/status;namespaceddeletingpolicies/status,verbs=get;update;patch
// get;list;watch: the process's cluster state (clusterstate) runs the
// policy cache whatever the controller, and the namespaceSelectors of
// cleanup policies read Namespaces' labels from it.
// +kubebuilder:rbac:groups=kyverno.io,resources=clusterpolicies;policies;policyexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups=policies.kyverno.io,resources=validatingpolicies;namespacedvalidatingpolicies;generatingpolicies;namespacedgeneratingpolicies;mutatingpolicies;namespacedmutatingpolicies;imagevalidatingpolicies;namespacedimagevalidatingpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policies.kyverno.io,resources=policyexceptions,verbs=get;list;watch
// list;watch: globalReference context entries and the CEL globalContext
// library read GlobalContextEntries, loaded by the process's
// clusterstate (an informer per kubernetesResource entry: grant those
// resources through the aggregated view role).
// +kubebuilder:rbac:groups=kyverno.io,resources=globalcontextentries,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// get;list;watch: a CRD created or deleted makes the TTL controller
// rediscover the kinds it watches at once.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// create: the TTL controller asks (SelfSubjectAccessReview) whether it may
// list, watch and delete a kind before it watches it.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=selfsubjectaccessreviews,verbs=create
// create;patch: every deletion, dry-run finding and invalid TTL is an
// events.k8s.io Event.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// get;list;watch;create;update;patch: leader election, on the Lease
// charter-cleanup (and the manager's own) in charter's namespace.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=charter,resources=leases,verbs=get;list;watch;create;update;patch
// create;patch: the manager's leader election announces a new leader
// with a core/v1 Event on its Lease.
// +kubebuilder:rbac:groups="",namespace=charter,resources=events,verbs=create;patch
