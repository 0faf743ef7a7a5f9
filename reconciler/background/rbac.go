package background

// The background controller's own permissions: `make manifests` generates
// them into config/rbac/background/role.yaml for the charter-background
// ServiceAccount. What the generate and mutate-existing rules of
// cluster-scoped policies read and write downstream is not listed here:
// it comes through the aggregated ClusterRole charter-background-aggregate,
// which gathers every ClusterRole labelled
// rbac.charter.dev/aggregate-to-background: "true"
// (config/rbac/background/downstream.yaml ships Kyverno's defaults:
// ConfigMaps, ResourceQuotas, LimitRanges, NetworkPolicies, Ingresses,
// IngressClasses, Roles, RoleBindings, ResourceClaims; no Secrets, no
// ServiceAccounts, no Namespace writes), so an operator widens what
// policies may generate without editing charter's roles; a write that is
// still forbidden fails its UpdateRequest naming the verb, group,
// resource and namespace (ForbiddenError). Namespaced policies write as a
// ServiceAccount of their namespace (impersonate.go), which
// config/rbac/background/impersonate.yaml lets charter impersonate. One
// marker per reason; the comment above each says why.
//
// get: a namespaced policy acts as the ServiceAccount
// --namespaced-policy-service-account of its namespace; a missing one
// fails the write naming it, never falls back to charter's identity.
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
//
// get;list;watch: generate and mutate-existing rules and their
// exceptions come from the process's policy cache (clusterstate).
// +kubebuilder:rbac:groups=kyverno.io,resources=clusterpolicies;policies;policyexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups=policies.kyverno.io,resources=validatingpolicies;namespacedvalidatingpolicies;generatingpolicies;namespacedgeneratingpolicies;mutatingpolicies;namespacedmutatingpolicies;imagevalidatingpolicies;namespacedimagevalidatingpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policies.kyverno.io,resources=policyexceptions,verbs=get;list;watch
// list;watch: globalReference context entries and the CEL globalContext
// library read GlobalContextEntries, loaded by the process's
// clusterstate (an informer per kubernetesResource entry: grant those
// resources through the aggregated view role).
// +kubebuilder:rbac:groups=kyverno.io,resources=globalcontextentries,verbs=list;watch
// get;list;watch;delete: UpdateRequests are the controller's queue:
// admission creates them, the controller deletes them once done.
// +kubebuilder:rbac:groups=kyverno.io,resources=updaterequests,verbs=get;list;watch;delete
// get;update;patch: a failed attempt's reason and retry count go to the
// UpdateRequest's status.
// +kubebuilder:rbac:groups=kyverno.io,resources=updaterequests/status,verbs=get;update;patch
// get;update;patch: a policy whose writes RBAC forbids gets a Background
// condition naming the missing permission.
// +kubebuilder:rbac:groups=kyverno.io,resources=clusterpolicies/status;policies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=policies.kyverno.io,resources=mutatingpolicies/status;namespacedmutatingpolicies/status;generatingpolicies/status;namespacedgeneratingpolicies/status,verbs=get;update;patch
// get;create;update: what GeneratingPolicies generated and mutate-existing
// MutatingPolicies patched goes into the triggers' reports (reports'
// AdmissionWriter in this process, --background-reports): read, then a
// conditional create or PUT.
// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports;clusterpolicyreports,verbs=get;create;update
// get;create;update;delete: the same in OpenReports
// (--reports-api=openreports or both); delete when, with both, the
// OpenReports copy follows a report that went away meanwhile.
// +kubebuilder:rbac:groups=openreports.io,resources=reports;clusterreports,verbs=get;create;update;delete
// get;list;watch: namespaceSelectors, and Namespaces as triggers.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// get: configMap context entries read the ConfigMap they name.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// create;patch: events on policies (UpdateRequestFailed,
// DownstreamExists) are core/v1 Events, in the default namespace for a
// ClusterPolicy.
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// get;list;watch;create;update;patch: leader election, with its own
// Lease in charter's namespace.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=charter,resources=leases,verbs=get;list;watch;create;update;patch
