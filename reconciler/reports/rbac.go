package reports

// The reports controller reads whatever kinds the installed policies match
// (metadata informers, full objects on demand, ConfigMaps for context
// entries), and owns one PolicyReport or ClusterPolicyReport per resource.
//
// +kubebuilder:rbac:groups=*,resources=*,verbs=get;list;watch
// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports;clusterpolicyreports,verbs=get;list;watch;create;update;patch;delete
