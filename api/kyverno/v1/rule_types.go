package v1

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Rule is one validate, mutate, generate or verifyImages control, applied to
// the resources its match block selects and its exclude block does not.
type Rule struct {
	// Name identifies the rule; unique within the policy.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// Context adds variables the rule can use.
	// +optional
	Context []ContextEntry `json:"context,omitempty"`

	// MatchResources selects the resources and requests the rule applies to.
	MatchResources MatchResources `json:"match,omitzero"`

	// ExcludeResources selects resources and requests the rule skips.
	// +optional
	ExcludeResources *MatchResources `json:"exclude,omitempty"`

	// ImageExtractors say where images are in custom resources (verifyImages
	// rules only).
	// +optional
	ImageExtractors ImageExtractorConfigs `json:"imageExtractors,omitempty"`

	// RawAnyAllConditions are preconditions: the rule applies only when they
	// pass. Either {any, all} or the older plain list; see ParseConditions.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	RawAnyAllConditions *apiextv1.JSON `json:"preconditions,omitempty"`

	// CELPreconditions are CEL match conditions (validate.cel rules only).
	// +optional
	CELPreconditions []admissionregistrationv1.MatchCondition `json:"celPreconditions,omitempty"`

	// Mutation changes matching or existing resources.
	// +optional
	Mutation *Mutation `json:"mutate,omitempty"`

	// Validation checks matching resources.
	// +optional
	Validation *Validation `json:"validate,omitempty"`

	// Generation creates resources.
	// +optional
	Generation *Generation `json:"generate,omitempty"`

	// VerifyImages verifies image signatures and attestations.
	// +optional
	VerifyImages []ImageVerification `json:"verifyImages,omitempty"`

	// SkipBackgroundRequests skips admission requests sent by the background
	// controller; true when absent.
	// +optional
	SkipBackgroundRequests *bool `json:"skipBackgroundRequests,omitempty"`

	// ReportProperties are added to every report result of the rule.
	// +optional
	ReportProperties map[string]string `json:"reportProperties,omitempty"`
}

// HasValidate reports whether the rule validates.
func (r *Rule) HasValidate() bool { return r.Validation != nil }

// HasMutate reports whether the rule mutates.
func (r *Rule) HasMutate() bool { return r.Mutation != nil }

// HasMutateExisting reports whether the rule mutates existing resources.
func (r *Rule) HasMutateExisting() bool { return r.Mutation.IsMutateExisting() }

// HasMutateStandard reports whether the rule mutates the admitted resource.
func (r *Rule) HasMutateStandard() bool { return r.Mutation != nil && len(r.Mutation.Targets) == 0 }

// HasGenerate reports whether the rule generates.
func (r *Rule) HasGenerate() bool { return r.Generation != nil }

// HasVerifyImages reports whether the rule verifies images.
func (r *Rule) HasVerifyImages() bool { return len(r.VerifyImages) > 0 }

// HasValidatePodSecurity reports whether the rule is a validate.podSecurity rule.
func (r *Rule) HasValidatePodSecurity() bool {
	return r.Validation != nil && r.Validation.PodSecurity != nil
}

// HasValidateCEL reports whether the rule is a validate.cel rule.
func (r *Rule) HasValidateCEL() bool { return r.Validation != nil && r.Validation.CEL != nil }

// HasVerifyManifests reports whether the rule verifies signed manifests.
func (r *Rule) HasVerifyManifests() bool {
	return r.Validation != nil && r.Validation.Manifests != nil && len(r.Validation.Manifests.Attestors) > 0
}

// GetSkipBackgroundRequests returns SkipBackgroundRequests, true when absent.
func (r *Rule) GetSkipBackgroundRequests() bool { return boolOr(r.SkipBackgroundRequests, true) }

// RuleType names the kind of a rule, as reports and UpdateRequests do.
type RuleType string

// Rule types.
const (
	RuleTypeMutate       RuleType = "Mutation"
	RuleTypeValidate     RuleType = "Validation"
	RuleTypeGenerate     RuleType = "Generation"
	RuleTypeVerifyImages RuleType = "ImageVerify"
)

// Type returns the kind of the rule, "" when it declares none.
func (r *Rule) Type() RuleType {
	switch {
	case r.HasValidate():
		return RuleTypeValidate
	case r.HasMutate():
		return RuleTypeMutate
	case r.HasGenerate():
		return RuleTypeGenerate
	case r.HasVerifyImages():
		return RuleTypeVerifyImages
	}
	return ""
}

// Preconditions decodes RawAnyAllConditions; nil when absent.
func (r *Rule) Preconditions() (*AnyAllConditions, error) {
	return ParseConditions(r.RawAnyAllConditions)
}
