package v1

// Annotations Kyverno policies carry and charter reads.
const (
	// AnnotationAutogenControllers lists the Pod controllers autogen rules
	// are generated for ("none" disables autogen), e.g.
	// "Deployment,StatefulSet".
	AnnotationAutogenControllers = "pod-policies.kyverno.io/autogen-controllers"

	// AnnotationPolicyScored set to "false" reports failures as warn.
	AnnotationPolicyScored = "policies.kyverno.io/scored"

	// AnnotationPolicyTitle is a policy's display title.
	AnnotationPolicyTitle = "policies.kyverno.io/title"

	// AnnotationPolicyCategory is a policy's category, copied to report results.
	AnnotationPolicyCategory = "policies.kyverno.io/category"

	// AnnotationPolicySeverity is a policy's severity (low, medium, high,
	// critical, info), copied to report results.
	AnnotationPolicySeverity = "policies.kyverno.io/severity"

	// AnnotationPolicyDescription is a policy's description.
	AnnotationPolicyDescription = "policies.kyverno.io/description"

	// AnnotationPolicySubject is the kinds a policy is about.
	AnnotationPolicySubject = "policies.kyverno.io/subject"

	// AnnotationMinVersion is the minimum Kyverno version a policy needs.
	AnnotationMinVersion = "policies.kyverno.io/minversion"
)

// Label on resources to delete after a time to live (a duration or an
// RFC 3339 time).
const LabelCleanupTTL = "cleanup.kyverno.io/ttl"
