package autogen

import (
	"encoding/json"
	"fmt"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// ComputeRules returns the policy's rules followed by the rules generated
// for Pod controllers, in Kyverno's order: the spec's rules as written, then
// for each of them autogen-<rule> and autogen-cronjob-<rule>. When rules are
// generated, spec rules named autogen-* (written by Kyverno < 1.10) are
// left out in favour of the fresh ones. The policy is not modified; the
// returned spec rules are the policy's own values (shallow copies).
func ComputeRules(policy kyvernov1.PolicyInterface) ([]kyvernov1.Rule, error) {
	generated, err := GeneratedRules(policy)
	if err != nil {
		return nil, err
	}
	rules := policy.GetSpec().Rules
	return withGenerated(rules, func(r kyvernov1.Rule) string { return r.Name }, generated), nil
}

// GeneratedRules returns only the generated rules, as published in the
// policy's status.autogen.rules; nil when autogen does not apply.
func GeneratedRules(policy kyvernov1.PolicyInterface) ([]kyvernov1.Rule, error) {
	p, err := planForPolicy(policy)
	if err != nil {
		return nil, err
	}
	out := make([]kyvernov1.Rule, 0, len(p.generated))
	for _, g := range p.generated {
		data, err := json.Marshal(g)
		if err != nil {
			return nil, fmt.Errorf("autogen rule %q: %w", g["name"], err)
		}
		var rule kyvernov1.Rule
		if err := json.Unmarshal(data, &rule); err != nil {
			return nil, fmt.Errorf("autogen rule %q: %w", g["name"], err)
		}
		out = append(out, rule)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// Controllers returns the controller kinds the policy's generated rules
// cover, sorted (e.g. [CronJob DaemonSet Deployment Job ReplicaSet
// ReplicationController StatefulSet] by default); nil when no rule is
// generated: autogen is off by annotation, the policy is not eligible, or
// none of its rules matches Pods.
func Controllers(policy kyvernov1.PolicyInterface) []string {
	p, err := planForPolicy(policy)
	if err != nil {
		return nil
	}
	return p.controllers
}

// IsGenerated reports whether a rule name is an autogen name.
func IsGenerated(ruleName string) bool { return isGeneratedName(ruleName) }

// planForPolicy runs the JSON-level planner on a typed policy.
func planForPolicy(policy kyvernov1.PolicyInterface) (plan, error) {
	spec := policy.GetSpec()
	rules := make([]map[string]any, 0, len(spec.Rules))
	for i := range spec.Rules {
		data, err := json.Marshal(&spec.Rules[i])
		if err != nil {
			return plan{}, fmt.Errorf("spec.rules[%d]: %w", i, err)
		}
		var m map[string]any
		if err := decode(data, &m); err != nil {
			return plan{}, fmt.Errorf("spec.rules[%d]: %w", i, err)
		}
		rules = append(rules, m)
	}
	return planFor(rules, policy.GetAnnotations())
}
