package policycache

import (
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/webhookrules"
)

// ControllerView is the set one controller of the process evaluates,
// assembled from the units the cache compiled for every installed policy:
// the controllers subscribe to it (Cache.OnSnapshot) instead of compiling
// their own.
type ControllerView struct {
	// Set holds the view's policies that compile, bound to the view's
	// exceptions.
	Set *engine.PolicySet
	// Units are the compiled units of every policy of the view, in set
	// order, those with faults included (they are not in Set): a
	// controller that must know what a policy was when it last compiled
	// finds its source here.
	Units []*engine.CompiledPolicy
	// Errors are the faults of the view's policies and exceptions that
	// did not compile.
	Errors fault.List
}

// HasBackgroundRules reports whether a policy has generate or
// mutate-existing rules: the background controller's policies.
func HasBackgroundRules(p kyvernov1.PolicyInterface) bool {
	rules := p.GetSpec().Rules
	for i := range rules {
		if rules[i].HasGenerate() || rules[i].HasMutateExisting() {
			return true
		}
	}
	return false
}

// IsScanned reports whether background scans evaluate a policy: it has
// spec.background (default true) and rules whose results go into reports
// (validate, verifyImages, or a scanned CEL kind, see CELScannedRules).
func IsScanned(p kyvernov1.PolicyInterface) bool {
	return p.GetSpec().BackgroundProcessingEnabled() && hasScannedRules(p)
}

// CELScannedRules returns the resource rules of a ValidatingPolicy, an
// ImageValidatingPolicy or a MutatingPolicy that mutates at admission,
// nil for other policies.
func CELScannedRules(p kyvernov1.PolicyInterface) []admissionregistrationv1.NamedRuleWithOperations {
	if rules := webhookrules.ValidatingPolicy(p); rules != nil {
		return rules
	}
	if rules := webhookrules.ImageValidatingPolicy(p); rules != nil {
		return rules
	}
	// A MutatingPolicy that mutates at admission, or existing targets, is
	// scanned too: its result says whether the existing object carries
	// the mutation (engine.WithMutationScan).
	return webhookrules.MutatingPolicyScan(p)
}

func hasScannedRules(p kyvernov1.PolicyInterface) bool {
	if CELScannedRules(p) != nil {
		return true
	}
	for i := range p.GetSpec().Rules {
		r := &p.GetSpec().Rules[i]
		if r.HasValidate() || r.HasVerifyImages() {
			return true
		}
	}
	return false
}

// viewUnits are the units a controller view is assembled from.
type viewUnits struct {
	policies   []*engine.CompiledPolicy
	exceptions []*engine.CompiledException
}

func (v viewUnits) same(o viewUnits) bool {
	return sameUnits(v.policies, o.policies) && sameUnits(v.exceptions, o.exceptions)
}

// byPolicyID orders units by policyid.Of, as the background scan
// always ordered its policies.
func byPolicyID(units []*engine.CompiledPolicy) []*engine.CompiledPolicy {
	out := append([]*engine.CompiledPolicy(nil), units...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// assembleView builds a controller view from its units.
func (b *Builder) assembleView(v viewUnits) ControllerView {
	set, err := b.compiler.Assemble(v.policies, v.exceptions)
	out := ControllerView{Set: set, Units: v.policies}
	if faults, ok := err.(fault.List); ok {
		out.Errors = faults
	}
	return out
}
