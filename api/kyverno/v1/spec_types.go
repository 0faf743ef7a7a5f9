package v1

import (
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// ValidationFailureAction says what a failing validate rule does: Enforce
// blocks the request, Audit only reports. The lower-case forms of older
// Kyverno releases are accepted.
// +kubebuilder:validation:Enum=audit;enforce;Audit;Enforce
type ValidationFailureAction string

// Validation failure actions.
const (
	Enforce ValidationFailureAction = "Enforce"
	Audit   ValidationFailureAction = "Audit"
)

// Enforce reports whether the action blocks failing requests (Enforce or enforce).
func (a ValidationFailureAction) Enforce() bool { return strings.EqualFold(string(a), string(Enforce)) }

// Audit reports whether the action only reports failures. Anything that is
// not Enforce audits, including the empty action.
func (a ValidationFailureAction) Audit() bool { return !a.Enforce() }

// IsValid reports whether a is one of audit, enforce, Audit, Enforce.
func (a ValidationFailureAction) IsValid() bool {
	switch a {
	case "audit", "enforce", Audit, Enforce:
		return true
	}
	return false
}

// Normalize returns Enforce or Audit.
func (a ValidationFailureAction) Normalize() ValidationFailureAction {
	if a.Enforce() {
		return Enforce
	}
	return Audit
}

// FailurePolicyType says what the API server does when the webhook fails.
// +kubebuilder:validation:Enum=Ignore;Fail
type FailurePolicyType string

// Failure policies.
const (
	Ignore FailurePolicyType = "Ignore"
	Fail   FailurePolicyType = "Fail"
)

// ApplyRulesType says whether all rules of a policy apply, or only the first
// that matches.
// +kubebuilder:validation:Enum=All;One
type ApplyRulesType string

// Apply rules types.
const (
	ApplyAll ApplyRulesType = "All"
	ApplyOne ApplyRulesType = "One"
)

// Spec is the body of a ClusterPolicy or Policy.
type Spec struct {
	// Rules are the policy's rules, applied in order.
	// +optional
	Rules []Rule `json:"rules,omitempty"`

	// ApplyRules is All (every matching rule applies) or One (processing
	// stops after the first rule that applies); All when absent.
	// +optional
	ApplyRules *ApplyRulesType `json:"applyRules,omitempty"`

	// FailurePolicy of the webhook. Deprecated: use
	// webhookConfiguration.failurePolicy.
	// +optional
	FailurePolicy *FailurePolicyType `json:"failurePolicy,omitempty"`

	// ValidationFailureAction is the policy-wide failure action. Deprecated:
	// use validate.failureAction.
	// +optional
	ValidationFailureAction ValidationFailureAction `json:"validationFailureAction,omitempty"`

	// ValidationFailureActionOverrides set the failure action per namespace.
	// Deprecated: use validate.failureActionOverrides.
	// +optional
	ValidationFailureActionOverrides []ValidationFailureActionOverride `json:"validationFailureActionOverrides,omitempty"`

	// EmitWarning returns admission warnings for audited failures and
	// mutations; false when absent.
	// +optional
	EmitWarning *bool `json:"emitWarning,omitempty"`

	// Admission applies the rules at admission; true when absent.
	// +optional
	Admission *bool `json:"admission,omitempty"`

	// Background applies the rules to existing resources in background
	// scans; true when absent.
	// +optional
	Background *bool `json:"background,omitempty"`

	// SchemaValidation is ignored. Deprecated.
	// +optional
	SchemaValidation *bool `json:"schemaValidation,omitempty"`

	// WebhookTimeoutSeconds is the webhook timeout. Deprecated: use
	// webhookConfiguration.timeoutSeconds.
	// +optional
	WebhookTimeoutSeconds *int32 `json:"webhookTimeoutSeconds,omitempty"`

	// MutateExistingOnPolicyUpdate mutates existing targets on policy
	// events. Deprecated: use mutate.mutateExistingOnPolicyUpdate.
	// +optional
	MutateExistingOnPolicyUpdate bool `json:"mutateExistingOnPolicyUpdate,omitempty"`

	// GenerateExistingOnPolicyUpdate is the old name of GenerateExisting.
	// Deprecated: use generate.generateExisting. A policy that sets it, to
	// any value, is refused (as Kyverno refuses it); it is kept here only to
	// name it in that error.
	// +optional
	GenerateExistingOnPolicyUpdate *bool `json:"generateExistingOnPolicyUpdate,omitempty"`

	// GenerateExisting generates for triggers that already exist.
	// Deprecated: use generate.generateExisting.
	// +optional
	GenerateExisting bool `json:"generateExisting,omitempty"`

	// UseServerSideApply makes generate rules use server-side apply.
	// +optional
	UseServerSideApply bool `json:"useServerSideApply,omitempty"`

	// WebhookConfiguration configures the admission webhook.
	// +optional
	WebhookConfiguration *WebhookConfiguration `json:"webhookConfiguration,omitempty"`
}

// WebhookConfiguration configures the admission webhook of a policy.
type WebhookConfiguration struct {
	// FailurePolicy is what the API server does when the webhook fails.
	// +optional
	FailurePolicy *FailurePolicyType `json:"failurePolicy,omitempty"`

	// TimeoutSeconds is the webhook timeout, 1 to 30 seconds.
	// +optional
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`

	// MatchConditions are CEL conditions the request must meet to be sent
	// to the webhook.
	// +optional
	MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions,omitempty"`
}

// BackgroundProcessingEnabled reports whether background scans apply the
// policy (true unless background is false).
func (s *Spec) BackgroundProcessingEnabled() bool { return boolOr(s.Background, true) }

// AdmissionProcessingEnabled reports whether the policy applies at admission
// (true unless admission is false).
func (s *Spec) AdmissionProcessingEnabled() bool { return boolOr(s.Admission, true) }

// GetEmitWarning reports whether admission warnings are returned.
func (s *Spec) GetEmitWarning() bool { return boolOr(s.EmitWarning, false) }

// GetApplyRules returns ApplyRules, All when absent.
func (s *Spec) GetApplyRules() ApplyRulesType {
	if s.ApplyRules == nil {
		return ApplyAll
	}
	return *s.ApplyRules
}

// GetFailurePolicy returns the webhook failure policy: the one under
// webhookConfiguration, else the deprecated spec field, else Fail.
func (s *Spec) GetFailurePolicy() FailurePolicyType {
	if s.WebhookConfiguration != nil && s.WebhookConfiguration.FailurePolicy != nil {
		return *s.WebhookConfiguration.FailurePolicy
	}
	if s.FailurePolicy != nil {
		return *s.FailurePolicy
	}
	return Fail
}

// GetWebhookTimeoutSeconds returns the webhook timeout, nil when unset.
func (s *Spec) GetWebhookTimeoutSeconds() *int32 {
	if s.WebhookConfiguration != nil && s.WebhookConfiguration.TimeoutSeconds != nil {
		return s.WebhookConfiguration.TimeoutSeconds
	}
	return s.WebhookTimeoutSeconds
}

// GetMatchConditions returns the webhook match conditions.
func (s *Spec) GetMatchConditions() []admissionregistrationv1.MatchCondition {
	if s.WebhookConfiguration == nil {
		return nil
	}
	return s.WebhookConfiguration.MatchConditions
}

// IsGenerateExisting reports whether generate rules apply to existing
// triggers: a rule's own generateExisting wins, then the policy fields.
func (s *Spec) IsGenerateExisting() bool {
	for i := range s.Rules {
		if g := s.Rules[i].Generation; g != nil && g.GenerateExisting != nil {
			return *g.GenerateExisting
		}
	}
	return s.GenerateExisting
}

// RuleGenerateExisting reports whether rule generates for existing triggers:
// its own field wins, then the policy-level fields.
func (s *Spec) RuleGenerateExisting(rule *Rule) bool {
	if rule.Generation != nil && rule.Generation.GenerateExisting != nil {
		return *rule.Generation.GenerateExisting
	}
	return s.GenerateExisting
}

// RuleMutateExistingOnPolicyUpdate reports whether rule mutates existing
// targets on policy events: its own field wins, then the policy field.
func (s *Spec) RuleMutateExistingOnPolicyUpdate(rule *Rule) bool {
	if rule.Mutation != nil && rule.Mutation.MutateExistingOnPolicyUpdate != nil {
		return *rule.Mutation.MutateExistingOnPolicyUpdate
	}
	return s.MutateExistingOnPolicyUpdate
}

// RuleFailureAction returns the failure action of a validate rule: the
// rule's own failureAction wins over the policy's validationFailureAction;
// Audit when neither is set.
func (s *Spec) RuleFailureAction(rule *Rule) ValidationFailureAction {
	if rule.Validation != nil && rule.Validation.FailureAction != nil {
		return rule.Validation.FailureAction.Normalize()
	}
	return s.ValidationFailureAction.Normalize()
}

// RuleFailureActionOverrides returns the per-namespace overrides of a
// validate rule: the rule's own, else the policy's.
func (s *Spec) RuleFailureActionOverrides(rule *Rule) []ValidationFailureActionOverride {
	if rule.Validation != nil && len(rule.Validation.FailureActionOverrides) > 0 {
		return rule.Validation.FailureActionOverrides
	}
	return s.ValidationFailureActionOverrides
}

// HasValidate reports whether any rule validates.
func (s *Spec) HasValidate() bool { return s.anyRule((*Rule).HasValidate) }

// HasMutate reports whether any rule mutates.
func (s *Spec) HasMutate() bool { return s.anyRule((*Rule).HasMutate) }

// HasMutateExisting reports whether any rule mutates existing resources.
func (s *Spec) HasMutateExisting() bool { return s.anyRule((*Rule).HasMutateExisting) }

// HasGenerate reports whether any rule generates.
func (s *Spec) HasGenerate() bool { return s.anyRule((*Rule).HasGenerate) }

// HasVerifyImages reports whether any rule verifies images.
func (s *Spec) HasVerifyImages() bool { return s.anyRule((*Rule).HasVerifyImages) }

func (s *Spec) anyRule(pred func(*Rule) bool) bool {
	for i := range s.Rules {
		if pred(&s.Rules[i]) {
			return true
		}
	}
	return false
}
