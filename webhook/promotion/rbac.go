package promotion

// get;list: the gate lists the PolicyReports of the namespace being promoted
// (see ../admission/rbac.go for the admission component's other
// permissions).
// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports,verbs=get;list
// The same of OpenReports' Reports (--reports-api=openreports).
// +kubebuilder:rbac:groups=openreports.io,resources=reports,verbs=get;list
