package reports

// The reports controller's permissions: `make manifests` generates them
// into config/rbac/reports/role.yaml for the charter-reports
// ServiceAccount (and admission's AdmissionWriter needs the report and
// policy ones too: see webhook/admission/rbac.go). The kinds it scans are
// not listed here: it reads them through the aggregated ClusterRole
// charter-reports-view, which gathers every ClusterRole labelled
// rbac.charter.dev/aggregate-to-reports: "true" (config/rbac/reports/view.yaml
// and config/rbac/read/workloads.yaml), so an operator narrows or widens
// what is scanned without editing charter's roles. One marker per reason;
// the comment above each says why.
//
// get;list;watch: the background policies and exceptions are compiled
// from informers.
// +kubebuilder:rbac:groups=kyverno.io,resources=clusterpolicies;policies;policyexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups=policies.kyverno.io,resources=validatingpolicies;namespacedvalidatingpolicies;generatingpolicies;namespacedgeneratingpolicies;mutatingpolicies;namespacedmutatingpolicies;imagevalidatingpolicies;namespacedimagevalidatingpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policies.kyverno.io,resources=policyexceptions,verbs=get;list;watch
// list;watch: globalReference context entries and the CEL globalContext
// library read GlobalContextEntries, loaded by the process's
// clusterstate (an informer per kubernetesResource entry: grant those
// resources through the aggregated view role).
// +kubebuilder:rbac:groups=kyverno.io,resources=globalcontextentries,verbs=list;watch
// get;list;watch: namespaceSelectors are judged from a Namespace
// informer, and a namespace's labels change what its resources' results
// are.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// get: configMap context entries read the ConfigMap they name.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// get: resource.Post of a namespaced CEL policy in a scan creates as
// the ServiceAccount --namespaced-policy-service-account of its
// namespace, impersonated (config/rbac/reports/impersonate.yaml), and
// first checks that it exists, so that a missing one is named.
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
// get;list;create;update;delete: one report per resource, written
// with a conditional PUT, listed by the sweep, deleted with its policy's
// last result.
// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports;clusterpolicyreports,verbs=get;list;create;update;delete
// The same in OpenReports (--reports-api=openreports or both).
// +kubebuilder:rbac:groups=openreports.io,resources=reports;clusterreports,verbs=get;list;create;update;delete
// get;list;watch;create;update;patch: leader election, with a Lease in
// charter's namespace.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=charter,resources=leases,verbs=get;list;watch;create;update;patch
// create;patch: leader election announces a new leader with a core/v1
// Event on its Lease, in charter's namespace.
// +kubebuilder:rbac:groups="",namespace=charter,resources=events,verbs=create;patch
