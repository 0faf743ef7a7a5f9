package v1

// The `source` Kyverno writes on the report results of this group's
// policies (cel-policy-types.md §7). A ClusterPolicy and a
// ValidatingPolicy of one name write results under one policy name; the
// source tells them apart.
const (
	ReportSourceValidatingPolicy      = "KyvernoValidatingPolicy"
	ReportSourceImageValidatingPolicy = "KyvernoImageValidatingPolicy"
	ReportSourceMutatingPolicy        = "KyvernoMutatingPolicy"
	ReportSourceGeneratingPolicy      = "KyvernoGeneratingPolicy"
)

// ReportSource returns the source of the report results of a policy of
// the kind: Kyverno's for the kinds of this group that report (either
// scope), "" for any other kind. kyverno.io's ClusterPolicy and Policy
// results carry the name of the tool that wrote them instead ("charter"
// for charter's).
func ReportSource(kind string) string {
	switch kind {
	case ValidatingPolicyKind, NamespacedValidatingPolicyKind:
		return ReportSourceValidatingPolicy
	case ImageValidatingPolicyKind, NamespacedImageValidatingPolicyKind:
		return ReportSourceImageValidatingPolicy
	case MutatingPolicyKind, NamespacedMutatingPolicyKind:
		return ReportSourceMutatingPolicy
	case GeneratingPolicyKind, NamespacedGeneratingPolicyKind:
		return ReportSourceGeneratingPolicy
	}
	return ""
}
