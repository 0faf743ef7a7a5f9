package gitsync

// The gitsync controller's permissions: `make manifests` generates them
// into config/rbac/gitsync/role.yaml for the charter-gitsync
// ServiceAccount. One marker per reason; the comment above each says why.
//
// Writes with charter's own identity happen only for PolicyRepositories
// in charter's namespace (the platform team's): Kyverno policies and
// exceptions (kyverno.io and policies.kyverno.io), Namespaces and CRDs,
// the kinds such a repository is for. A repository of any other namespace writes as the ServiceAccount it names
// (impersonated: config/rbac/gitsync/impersonate.yaml), so Kubernetes RBAC
// decides what a tenant installs. Platform repositories that hold other
// kinds need a ClusterRole of your own bound to charter-gitsync.
//
// get;list;watch: the controller watches PolicyRepositories; patch: the
// push receiver asks for a sync with an annotation.
// +kubebuilder:rbac:groups=gitops.charter.dev,resources=policyrepositories,verbs=get;list;watch;patch
// get;update;patch: conditions, revisions and inventory go to status.
// +kubebuilder:rbac:groups=gitops.charter.dev,resources=policyrepositories/status,verbs=get;update;patch
// get: a repository's credentials and verification keys, in the
// repository's own namespace, read once per sync (never cached).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
//
// An oci:// repository without spec.secretRef reads its registry with the
// imagePullSecrets of the ServiceAccount it runs as.
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
// get;list;watch;create;update;patch;delete: platform repositories
// declare the Namespaces their policies live in, and prune them.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;update;patch;delete
// get;list;watch;create;update;patch: platform repositories may ship the
// CRDs of what they apply; CRDs are never pruned, hence no delete.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch;create;update;patch
// get;list;watch;create;update;patch;delete: what platform repositories
// are for, applied server-side and pruned when they leave the revision.
// +kubebuilder:rbac:groups=kyverno.io,resources=clusterpolicies;policies;policyexceptions;cleanuppolicies;clustercleanuppolicies,verbs=get;list;watch;create;update;patch;delete
// get;list;watch;create;update;patch;delete: the same for Kyverno's CEL
// policy kinds (policies.kyverno.io/v1) and that group's PolicyException.
// +kubebuilder:rbac:groups=policies.kyverno.io,resources=validatingpolicies;namespacedvalidatingpolicies;mutatingpolicies;namespacedmutatingpolicies;generatingpolicies;namespacedgeneratingpolicies;deletingpolicies;namespaceddeletingpolicies;imagevalidatingpolicies;namespacedimagevalidatingpolicies;policyexceptions,verbs=get;list;watch;create;update;patch;delete
// create: the pre-apply check asks, as policy admission does, whether
// the background controller may write what a ClusterPolicy's generate and
// mutate-existing rules name (a SubjectAccessReview per verb).
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// get: the pre-apply check warns of a globalReference whose
// GlobalContextEntry is not Ready, as policy admission does (read once
// per reference, never cached).
// +kubebuilder:rbac:groups=kyverno.io,resources=globalcontextentries,verbs=get
// create;patch: sync outcomes are told as events.k8s.io Events on the
// PolicyRepository, in its namespace.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// get;list;watch;create;update;patch: leader election, with a Lease in
// charter's namespace.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=charter,resources=leases,verbs=get;list;watch;create;update;patch
// create;patch: leader election announces a new leader with a core/v1
// Event on its Lease, in charter's namespace.
// +kubebuilder:rbac:groups="",namespace=charter,resources=events,verbs=create;patch
