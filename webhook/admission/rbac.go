package admission

// What the admission component needs from the API server: the policies it
// serves, Namespaces for namespaceSelector, the webhook configurations and
// certificate Secrets it owns, Leases for leader election, Events, and the
// RoleBindings and ClusterRoleBindings that give a requester its roles,
// and ConfigMaps that policies' configMap context entries read. What an
// apiCall context entry reads is up to the policy: grant charter's
// ServiceAccount that access with a ClusterRole of your own.
// Leader election announces each new leader with a core/v1 Event (the Lease
// lock records through client-go's core recorder), hence the core Events
// besides the events.k8s.io ones charter's own events use.
//
// +kubebuilder:rbac:groups=kyverno.io,resources=clusterpolicies;policies;policyexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups=kyverno.io,resources=clusterpolicies/status;policies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings;clusterrolebindings,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
