package autogen

import "slices"

// plan is what autogen decides for one policy, computed on the JSON form of
// its rules.
type plan struct {
	// controllers are the kinds the generated rules match (sorted); nil
	// when no rule is generated.
	controllers []string
	// generated are the generated rules, in order.
	generated []map[string]any
}

// planFor works out the generated rules of a policy from its rules (JSON
// objects) and annotations. rules is not modified.
func planFor(rules []map[string]any, annotations map[string]string) (plan, error) {
	controllers := requestedControllers(annotations, policyEligible(rules))
	if len(controllers) == 0 {
		return plan{}, nil
	}
	generated, err := generateRules(rules, controllers)
	if err != nil {
		return plan{}, err
	}
	if len(generated) == 0 {
		return plan{}, nil
	}
	return plan{controllers: effectiveControllers(controllers), generated: generated}, nil
}

// effectiveControllers are the kinds the generated rules cover for a
// requested list: the template controllers picked by podTemplateKinds, plus
// CronJob when requested ("all" covers every default controller).
func effectiveControllers(requested []string) []string {
	out := podTemplateKinds(requested)
	if wantsCronJob(requested) {
		out = append(out, CronJob)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// withGenerated returns the rules of the policy followed by the generated
// ones. When autogen produced rules, original rules named autogen-* are
// dropped: they are leftovers of Kyverno < 1.10, superseded by the fresh
// ones.
func withGenerated[R any](rules []R, name func(R) string, generated []R) []R {
	if len(generated) == 0 {
		return rules
	}
	out := make([]R, 0, len(rules)+len(generated))
	for _, r := range rules {
		if !isGeneratedName(name(r)) {
			out = append(out, r)
		}
	}
	return append(out, generated...)
}
