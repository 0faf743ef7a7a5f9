package admission

// The admission component's permissions: `make manifests` generates them
// into config/rbac/admission/role.yaml (ClusterRole and, for the markers
// with namespace=charter, a Role in charter's namespace) for the
// charter-admission ServiceAccount. One marker per reason; the comment
// above each says why. What an apiCall context entry reads, and the
// resources whose Audit results go into their reports, come through the
// aggregated ClusterRole charter-admission-view: label a ClusterRole
// rbac.charter.dev/aggregate-to-admission: "true" to widen it
// (config/rbac/admission/view.yaml, config/rbac/read/workloads.yaml).
// config/rbac_test.go holds the reviewed list these may not exceed.
//
// get;list;watch: the policy cache serves the installed policies and
// exceptions from informers.
// +kubebuilder:rbac:groups=kyverno.io,resources=clusterpolicies;policies;policyexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups=policies.kyverno.io,resources=validatingpolicies;namespacedvalidatingpolicies;generatingpolicies;namespacedgeneratingpolicies;mutatingpolicies;namespacedmutatingpolicies;imagevalidatingpolicies;namespacedimagevalidatingpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policies.kyverno.io,resources=policyexceptions,verbs=get;list;watch
// get;list;watch: globalReference context entries and the CEL
// globalContext library read GlobalContextEntries, loaded by the
// process's clusterstate; the leader's GlobalContextEntry reconciler
// reads them from the manager's cache.
// +kubebuilder:rbac:groups=kyverno.io,resources=globalcontextentries,verbs=get;list;watch
// get;update;patch: the leader writes each GlobalContextEntry's Ready
// condition and lastRefreshTime.
// +kubebuilder:rbac:groups=kyverno.io,resources=globalcontextentries/status,verbs=get;update;patch
// get;update;patch: the leader writes each policy's Ready condition and
// autogen rules into status.
// +kubebuilder:rbac:groups=kyverno.io,resources=clusterpolicies/status;policies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=policies.kyverno.io,resources=validatingpolicies/status;namespacedvalidatingpolicies/status;generatingpolicies/status;namespacedgeneratingpolicies/status;mutatingpolicies/status;namespacedmutatingpolicies/status;imagevalidatingpolicies/status;namespacedimagevalidatingpolicies/status,verbs=get;update;patch
// get: resource.Post of a namespaced CEL policy creates as the
// ServiceAccount --namespaced-policy-service-account of its namespace,
// impersonated (config/rbac/admission/impersonate.yaml), and first checks
// that it exists, so that a missing one is named.
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get
// create: the generate and mutate-existing rules an admitted request
// triggers become UpdateRequests (webhook/updaterequest).
// +kubebuilder:rbac:groups=kyverno.io,resources=updaterequests,verbs=create
// list;watch: the UpdateRequests that exist are counted against
// --update-request-threshold.
// +kubebuilder:rbac:groups=kyverno.io,resources=updaterequests,verbs=list;watch
// update: a new UpdateRequest is marked Pending in its status.
// +kubebuilder:rbac:groups=kyverno.io,resources=updaterequests/status,verbs=update
// get;list;watch: namespaceSelectors and the charter.dev/enforcement label
// are judged from a Namespace informer.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// get: configMap context entries read the ConfigMap they name, in any
// namespace, on every evaluation.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// get;create;update: every replica merges the Audit results of the
// requests it admitted into the resource's report (reports'
// AdmissionWriter): read, then a conditional create or PUT.
// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports;clusterpolicyreports,verbs=get;create;update
// get;create;update;delete: the same in OpenReports
// (--reports-api=openreports or both); delete when, with both, the
// OpenReports copy follows a report that went away meanwhile.
// +kubebuilder:rbac:groups=openreports.io,resources=reports;clusterreports,verbs=get;create;update;delete
// create: the CEL authorizer of validate.cel rules asks what the
// requesting user (or a service account a policy names) may do, with a
// SubjectAccessReview per check its cache does not answer.
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// get;list;watch: a rule's roles/clusterRoles match the requester's
// bindings, read from informers.
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings;clusterrolebindings,verbs=get;list;watch
// get;list;watch;create;update;patch: the serving certificate and its CA
// live in Secrets of charter's namespace only, issued and rotated by the
// leader.
// +kubebuilder:rbac:groups="",namespace=charter,resources=secrets,verbs=get;list;watch;create;update;patch
// get;list;watch;create;update;patch;delete: the leader writes the webhook
// configurations from the installed policies, and `serve
// --cleanup-webhooks` deletes them.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch;create;update;patch;delete
// get;list;watch;create;update;patch: leader election, with a Lease in
// charter's namespace.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=charter,resources=leases,verbs=get;list;watch;create;update;patch
// create;patch: admission decisions are told as events.k8s.io Events on
// the policy and the resource, in the resource's namespace.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// create;patch: leader election announces a new leader with a core/v1
// Event on its Lease, in charter's namespace.
// +kubebuilder:rbac:groups="",namespace=charter,resources=events,verbs=create;patch
