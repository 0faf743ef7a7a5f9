// Package charter holds the names of the labels charter reads on objects
// it does not own: no types, only the contract between the people who
// write those labels (policy authors, namespace owners, GitOps overlays)
// and the code that reads them. Every name carries charter's prefix,
// charter.dev/.
package charter

// Staged promotion (DESIGN.md, Flows 6): a policy labelled
// StagedLabel=StagedValue keeps its own failure action everywhere except in
// namespaces labelled EnforcementLabel=EnforcementEnforce, where its
// validate rules act as Enforce. Moving a namespace to EnforcementEnforce is
// itself admitted only while that namespace's PolicyReports show no failing
// results for the staged policies.
const (
	// StagedLabel marks a ClusterPolicy or Policy as staged for
	// enforcement, namespace by namespace.
	StagedLabel = "charter.dev/staged"
	// StagedValue is the only value of StagedLabel that stages a policy.
	StagedValue = "true"

	// EnforcementLabel on a Namespace sets the action of staged policies
	// there.
	EnforcementLabel = "charter.dev/enforcement"
	// EnforcementEnforce makes staged policies' validate rules Enforce in
	// the namespace.
	EnforcementEnforce = "enforce"
	// EnforcementAudit states that the namespace is not promoted: staged
	// policies keep their own action, as they do without the label.
	EnforcementAudit = "audit"
)

// IsStaged reports whether an object's labels stage it for enforcement.
func IsStaged(labels map[string]string) bool { return labels[StagedLabel] == StagedValue }

// Enforces reports whether a namespace's labels promote staged policies to
// Enforce there.
func Enforces(namespaceLabels map[string]string) bool {
	return namespaceLabels[EnforcementLabel] == EnforcementEnforce
}

// ValidEnforcement reports whether v is a value EnforcementLabel may take.
func ValidEnforcement(v string) bool { return v == EnforcementEnforce || v == EnforcementAudit }
