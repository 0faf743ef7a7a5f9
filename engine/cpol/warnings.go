package cpol

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/conditions"
	"github.com/charter-dev/charter/engine/match"
)

// Warnings returns the warnings Kyverno 1.19 gives when it admits a
// ClusterPolicy or Policy (pkg/validation/policy/validate.go): deprecated
// failure actions and operators, a JSON patch on Pods, a Pod rule whose
// autogen leaves some controllers out, a rule reading status or replicas
// without matching the subresource, and the deprecated predicateType.
// Admission returns them with the response and the CLI prints them; they
// never refuse. The CEL kinds have no warnings of their own.
func Warnings(p kyvernov1.PolicyInterface) []string {
	spec := p.GetSpec()
	if spec == nil {
		return nil
	}
	var out []string
	add := func(w string) {
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	if lowercaseAction(spec.ValidationFailureAction, spec.ValidationFailureActionOverrides) {
		add(warnLowercaseAction)
	}
	for i := range spec.Rules {
		r := &spec.Rules[i]
		if v := r.Validation; v != nil && v.FailureAction != nil && lowercaseAction(*v.FailureAction, v.FailureActionOverrides) {
			add(warnLowercaseAction)
		}
	}
	for i := range spec.Rules {
		r := &spec.Rules[i]
		if r.HasMutate() && r.Mutation.PatchesJSON6902 != "" && slices.Contains(r.MatchResources.ResourceDescription.Kinds, "Pod") {
			add("Pods managed by workload controllers should not be directly mutated using policies. " +
				"Use the autogen feature or write policies that match Pod controllers.")
		}
		if matchesOnlyPods(r) && autogenLeavesControllersOut(p.GetAnnotations()[kyvernov1.AnnotationAutogenControllers]) {
			add("Policies that match Pods apply to all Pods including those created and managed by controllers " +
				"excluded from autogen. Use preconditions to exclude the Pods managed by controllers which are " +
				"excluded from autogen. Refer to https://kyverno.io/docs/writing-policies/autogen/ for details.")
		}
		kinds := r.MatchResources.GetKinds()
		if r.ExcludeResources != nil {
			kinds = append(kinds, r.ExcludeResources.GetKinds()...)
		}
		if r.HasValidate() {
			v := r.Validation.DeepCopy()
			if v.Deny != nil {
				v.Deny.RawAnyAllConditions = nil
			}
			subresourceWarnings(v, kinds, add)
		}
		if r.HasMutate() {
			mutateKinds := slices.Clone(kinds)
			for _, t := range r.Mutation.Targets {
				mutateKinds = append(mutateKinds, t.Kind)
			}
			subresourceWarnings(r.Mutation, mutateKinds, add)
		}
		for _, iv := range r.VerifyImages {
			for _, a := range iv.Attestations {
				if a.PredicateType != "" {
					add(fmt.Sprintf("predicateType has been deprecated use 'type: %s' instead of 'predicateType: %s'", a.PredicateType, a.PredicateType))
				}
			}
			if iv.Validation.Deny != nil || iv.Validation.Message != "" {
				v := iv.Validation.DeepCopy()
				if v.Deny != nil {
					v.Deny.RawAnyAllConditions = nil
				}
				subresourceWarnings(v, kinds, add)
			}
		}
		for _, op := range ruleOperators(r) {
			if alt, deprecated := conditions.Deprecation(op); deprecated {
				add(fmt.Sprintf("Operator %s has been deprecated and will be removed soon. Use these instead: %s", op, alt))
			}
		}
	}
	return out
}

const warnLowercaseAction = "Validation failure actions enforce/audit are deprecated, use Enforce/Audit instead."

func lowercaseAction(a kyvernov1.ValidationFailureAction, overrides []kyvernov1.ValidationFailureActionOverride) bool {
	if a == "enforce" || a == "audit" {
		return true
	}
	for _, o := range overrides {
		if o.Action == "enforce" || o.Action == "audit" {
			return true
		}
	}
	return false
}

// matchesOnlyPods reports whether every kind a rule matches is Pod (or a
// Pod subresource).
func matchesOnlyPods(r *kyvernov1.Rule) bool {
	kinds := map[string]bool{}
	for _, k := range r.MatchResources.GetKinds() {
		kinds[match.ParseKind(k).Kind] = true
	}
	return len(kinds) == 1 && kinds["Pod"]
}

// autogenLeavesControllersOut reports whether the autogen annotation names
// some Pod controllers but not all of them.
func autogenLeavesControllersOut(annotation string) bool {
	if annotation == "" || annotation == "none" {
		return false
	}
	names := strings.Split(strings.ToLower(annotation), ",")
	sort.Strings(names)
	return !slices.Equal(names, []string{"cronjob", "daemonset", "deployment", "job", "statefulset"})
}

// subresourceWarnings warns, as Kyverno does, when a rule's text reads
// replicas or status while none of its kinds is the scale or status
// subresource.
func subresourceWarnings(block any, kinds []string, add func(string)) {
	data, err := json.Marshal(block)
	if err != nil {
		return
	}
	text := string(data)
	kindHas := func(s string) bool {
		return slices.ContainsFunc(kinds, func(k string) bool { return strings.Contains(strings.ToLower(k), s) })
	}
	if strings.Contains(text, "replicas") && !kindHas("scale") {
		add("You are matching on replicas but not including the scale subresource in the policy.")
	}
	if (strings.Contains(text, ".status") || strings.Contains(text, `"status":`)) && !kindHas("status") {
		add("You are matching on status but not including the status subresource in the policy.")
	}
}

// ruleOperators returns the operators of the conditions Kyverno checks for
// deprecated ones: validate.deny, validate.foreach preconditions and deny,
// and verifyImages attestation conditions.
func ruleOperators(r *kyvernov1.Rule) []string {
	var ops []string
	addBlock := func(b *kyvernov1.AnyAllConditions) {
		if b == nil {
			return
		}
		for _, c := range append(slices.Clone(b.AnyConditions), b.AllConditions...) {
			ops = append(ops, string(c.Operator))
		}
	}
	addDeny := func(d *kyvernov1.Deny) {
		if d == nil {
			return
		}
		if b, err := kyvernov1.ParseConditions(d.RawAnyAllConditions); err == nil {
			addBlock(b)
		}
	}
	if v := r.Validation; v != nil {
		addDeny(v.Deny)
		for i := range v.ForEachValidation {
			addBlock(v.ForEachValidation[i].AnyAllConditions)
			addDeny(v.ForEachValidation[i].Deny)
		}
	}
	for _, iv := range r.VerifyImages {
		for _, a := range iv.Attestations {
			for i := range a.Conditions {
				addBlock(&a.Conditions[i])
			}
		}
	}
	return ops
}
