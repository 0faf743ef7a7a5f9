// Package webhookrules reads off a CEL policy's spec what its admission
// webhooks register with the API server: the resource rules of its
// matchConstraints and of its autogen copies (engine/autogen), per kind,
// and its matchConstraints' selectors. It compiles nothing, so the
// webhook configuration, the policy cache's views and the reports read it
// without the engine. It is a leaf of engine/.
package webhookrules

import (
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/autogen"
)

// ValidatingPolicy returns the resource rules a ValidatingPolicy's
// admission webhook must register: those of its matchConstraints and of its
// autogen copies for Pod controllers. It returns nil for other policies.
func ValidatingPolicy(p kyvernov1.PolicyInterface) []admissionregistrationv1.NamedRuleWithOperations {
	vp, ok := p.(policiesv1.ValidatingPolicyLike)
	if !ok {
		return nil
	}
	spec := vp.GetValidatingPolicySpec()
	if spec.MatchConstraints == nil {
		return nil
	}
	out := append([]admissionregistrationv1.NamedRuleWithOperations(nil), spec.MatchConstraints.ResourceRules...)
	for _, ag := range autogen.ValidatingPolicy(spec) {
		out = append(out, ag.Spec.MatchConstraints.ResourceRules...)
	}
	return out
}

// MutatingPolicy returns the resource rules a MutatingPolicy's
// admission webhook must register: those of its matchConstraints and of
// its autogen copies for Pod controllers. It returns nil for other
// policies.
func MutatingPolicy(p kyvernov1.PolicyInterface) []admissionregistrationv1.NamedRuleWithOperations {
	mp, ok := p.(policiesv1.MutatingPolicyLike)
	if !ok {
		return nil
	}
	spec := mp.GetMutatingPolicySpec()
	if spec.MatchConstraints == nil || !spec.AdmissionEnabled() {
		// A mutate-existing policy without admission patches nothing at
		// admission: its triggers come through the validating webhook
		// (MutateExistingTriggers).
		return nil
	}
	out := append([]admissionregistrationv1.NamedRuleWithOperations(nil), spec.MatchConstraints.ResourceRules...)
	for _, ag := range autogen.MutatingPolicy(spec) {
		out = append(out, ag.Spec.MatchConstraints.ResourceRules...)
	}
	return out
}

// MutatingPolicyScan returns the resource rules of the objects the
// background scan checks a MutatingPolicy on (the engine's
// WithMutationScan): those it mutates at admission (MutatingPolicy) and,
// for a policy that also mutates existing targets, its targets'
// (targetMatchConstraints' resource rules, else matchConstraints'). A
// policy that does not mutate at admission is not scanned, as before:
// nil, as for other policies.
func MutatingPolicyScan(p kyvernov1.PolicyInterface) []admissionregistrationv1.NamedRuleWithOperations {
	out := MutatingPolicy(p)
	if out == nil {
		return nil
	}
	spec := p.(policiesv1.MutatingPolicyLike).GetMutatingPolicySpec()
	if !spec.MutateExistingEnabled() {
		return out
	}
	if tmc := spec.TargetMatchConstraints; tmc != nil && len(tmc.ResourceRules) > 0 {
		return append(out, tmc.ResourceRules...)
	}
	if spec.MatchConstraints != nil {
		out = append(out, spec.MatchConstraints.ResourceRules...)
	}
	return out
}

// ImageValidatingPolicy returns the resource rules an
// ImageValidatingPolicy's webhooks must register: those of its
// matchConstraints and of its autogen copies. It returns nil for other
// policies.
func ImageValidatingPolicy(p kyvernov1.PolicyInterface) []admissionregistrationv1.NamedRuleWithOperations {
	ip, ok := p.(policiesv1.ImageValidatingPolicyLike)
	if !ok {
		return nil
	}
	spec := ip.GetImageValidatingPolicySpec()
	if spec.MatchConstraints == nil {
		return nil
	}
	out := slices.Clone(spec.MatchConstraints.ResourceRules)
	var pc *policiesv1.PodControllersGenerationConfiguration
	if ag := spec.AutogenConfiguration; ag != nil {
		pc = ag.PodControllers
	}
	for _, t := range autogen.PodControllerTargets(spec.MatchConstraints, pc) {
		out = append(out, t.Rules...)
	}
	return out
}

// GeneratingPolicy returns the resource rules a GeneratingPolicy's
// admission webhook registers: its matchConstraints' rules, for CREATE,
// UPDATE and DELETE whatever operations they name, since an UPDATE away
// from the policy and a DELETE end a synchronized trigger. nil for other
// policies.
func GeneratingPolicy(p kyvernov1.PolicyInterface) []admissionregistrationv1.NamedRuleWithOperations {
	gp, ok := p.(policiesv1.GeneratingPolicyLike)
	if !ok {
		return nil
	}
	mc := gp.GetGeneratingPolicySpec().MatchConstraints
	if mc == nil {
		return nil
	}
	out := make([]admissionregistrationv1.NamedRuleWithOperations, 0, len(mc.ResourceRules))
	for _, r := range mc.ResourceRules {
		r = *r.DeepCopy()
		r.Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete}
		out = append(out, r)
	}
	return out
}

// MutateExistingTriggers returns the resource rules whose requests
// trigger a mutate-existing MutatingPolicy: its matchConstraints' rules,
// which the validating webhook registers (UpdateRequests are made from
// allowed requests, after every mutation). It returns nil for other
// policies.
func MutateExistingTriggers(p kyvernov1.PolicyInterface) []admissionregistrationv1.NamedRuleWithOperations {
	mp, ok := p.(policiesv1.MutatingPolicyLike)
	if !ok {
		return nil
	}
	spec := mp.GetMutatingPolicySpec()
	if !spec.MutateExistingEnabled() || spec.MatchConstraints == nil {
		return nil
	}
	return append([]admissionregistrationv1.NamedRuleWithOperations(nil), spec.MatchConstraints.ResourceRules...)
}

// MatchConstraints returns the spec.matchConstraints (nil when unset)
// of a Validating, ImageValidating, Mutating or GeneratingPolicy, of
// either scope, and true; for other kinds nil and false.
func MatchConstraints(p kyvernov1.PolicyInterface) (*admissionregistrationv1.MatchResources, bool) {
	switch t := p.(type) {
	case policiesv1.ValidatingPolicyLike:
		return t.GetValidatingPolicySpec().MatchConstraints, true
	case policiesv1.ImageValidatingPolicyLike:
		return t.GetImageValidatingPolicySpec().MatchConstraints, true
	case policiesv1.MutatingPolicyLike:
		return t.GetMutatingPolicySpec().MatchConstraints, true
	case policiesv1.GeneratingPolicyLike:
		return t.GetGeneratingPolicySpec().MatchConstraints, true
	}
	return nil, false
}

// Selectors are the namespaceSelector and objectSelector of a
// policies.kyverno.io policy's matchConstraints, nil for other kinds and
// for none. A policy's own webhook (the engine's HasWebhookConditions)
// carries them: the API server evaluates a webhook's matchConditions only
// for the requests its selectors select, so a condition that errs under
// failurePolicy Fail never refuses a request outside what the policy
// matches. They mean the same for a webhook as in matchConstraints.
func Selectors(p kyvernov1.PolicyInterface) (namespaceSelector, objectSelector *metav1.LabelSelector) {
	mc, _ := MatchConstraints(p)
	if mc == nil {
		return nil, nil
	}
	return mc.NamespaceSelector, mc.ObjectSelector
}
