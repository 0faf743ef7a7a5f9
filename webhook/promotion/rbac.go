package promotion

// get;list: the gate lists the PolicyReports of the namespace being promoted
// (see ../admission/rbac.go for the admission component's other
// permissions).
// +kubebuilder:rbac:groups=wgpolicyk8s.io,resources=policyreports,verbs=get;list
