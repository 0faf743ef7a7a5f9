package v1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types and reasons of a policy's status.
const (
	// PolicyConditionReady is True when the policy is compiled and in force.
	PolicyConditionReady = "Ready"

	// PolicyReasonSucceeded: the policy is in force.
	PolicyReasonSucceeded = "Succeeded"
	// PolicyReasonFailed: the policy could not be compiled or installed.
	PolicyReasonFailed = "Failed"
	// PolicyReasonUnsupported: the policy compiles, but uses a feature
	// charter cannot run in the cluster; the message names each field.
	PolicyReasonUnsupported = "Unsupported"
)

// PolicyStatus is what charter observed about a policy. Autogen rules and
// readiness live here, never in spec.
type PolicyStatus struct {
	// Ready is true when the policy is in force. Deprecated: read the
	// Ready condition.
	// +optional
	Ready *bool `json:"ready,omitempty"`

	// Admission is spec.admission with its default applied: whether the
	// rules apply at admission. Set by charter, so `kubectl get cpol`
	// shows it whether or not the spec says it, without defaulting spec.
	// +optional
	Admission *bool `json:"admission,omitempty"`

	// Background is spec.background with its default applied: whether
	// background scans (and, for generate and mutate-existing rules,
	// existing resources) are processed. Set by charter, as Admission.
	// +optional
	Background *bool `json:"background,omitempty"`

	// Conditions are the policy's conditions, e.g. Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Autogen holds the rules generated for Pod controllers.
	// +optional
	Autogen AutogenStatus `json:"autogen,omitzero"`

	// RuleCount counts the rules by type.
	// +optional
	RuleCount RuleCountStatus `json:"rulecount,omitzero"`

	// ValidatingAdmissionPolicy reports on the ValidatingAdmissionPolicy
	// generated from the policy's CEL rules.
	// +optional
	ValidatingAdmissionPolicy ValidatingAdmissionPolicyStatus `json:"validatingadmissionpolicy,omitzero"`
}

// AutogenStatus holds the rules generated for Pod controllers.
type AutogenStatus struct {
	// Rules are the generated rules.
	// +optional
	Rules []Rule `json:"rules,omitempty"`
}

// RuleCountStatus counts a policy's rules by type.
type RuleCountStatus struct {
	// Validate is the number of validate rules.
	Validate int `json:"validate"`
	// Generate is the number of generate rules.
	Generate int `json:"generate"`
	// Mutate is the number of mutate rules.
	Mutate int `json:"mutate"`
	// VerifyImages is the number of verifyImages rules.
	VerifyImages int `json:"verifyimages"`
}

// ValidatingAdmissionPolicyStatus reports on a generated
// ValidatingAdmissionPolicy.
type ValidatingAdmissionPolicyStatus struct {
	// Generated is true when the ValidatingAdmissionPolicy exists.
	Generated bool `json:"generated"`
	// Message says why it was not generated.
	// +optional
	Message string `json:"message,omitempty"`
}

// IsReady reports whether the Ready condition is True.
func (s *PolicyStatus) IsReady() bool {
	return meta.IsStatusConditionTrue(s.Conditions, PolicyConditionReady)
}

// SetReady sets the Ready condition (and the deprecated ready field).
func (s *PolicyStatus) SetReady(ready bool, generation int64, reason, message string) {
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{
		Type:               PolicyConditionReady,
		Status:             status,
		ObservedGeneration: generation,
		Reason:             reason,
		Message:            message,
	})
	s.Ready = &ready
}

// CountRules returns the rule counts of spec.
func CountRules(spec *Spec) RuleCountStatus {
	var c RuleCountStatus
	for i := range spec.Rules {
		r := &spec.Rules[i]
		if r.HasValidate() {
			c.Validate++
		}
		if r.HasMutate() {
			c.Mutate++
		}
		if r.HasGenerate() {
			c.Generate++
		}
		if r.HasVerifyImages() {
			c.VerifyImages++
		}
	}
	return c
}
