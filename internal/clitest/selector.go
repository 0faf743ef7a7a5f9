package clitest

import (
	"fmt"
	"strings"

	"github.com/charter-dev/charter/engine/wildcard"
)

// CaseSelector picks the expected results a run checks, as Kyverno's
// `kyverno test --test-case-selector "policy=NAME, rule=NAME,
// resource=NAME"` does. Each value may hold the wildcards * and ?; a key
// left out selects everything. A result is checked when its policy and rule
// match and, narrowing the result to them, the resources that match.
type CaseSelector struct {
	Policy, Rule, Resource string
}

// DefaultCaseSelector selects every result.
const DefaultCaseSelector = "policy=*,rule=*,resource=*"

// ParseCaseSelector parses "policy=A, rule=B, resource=C"; any subset of
// the keys, in any order.
func ParseCaseSelector(s string) (*CaseSelector, error) {
	sel := &CaseSelector{Policy: "*", Rule: "*", Resource: "*"}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		key, value, ok := strings.Cut(part, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !ok || value == "" {
			return nil, fmt.Errorf("test case selector %q: %q is not key=value", s, part)
		}
		switch key {
		case "policy":
			sel.Policy = value
		case "rule":
			sel.Rule = value
		case "resource":
			sel.Resource = value
		default:
			return nil, fmt.Errorf("test case selector %q: unknown key %q, want policy, rule or resource", s, key)
		}
	}
	return sel, nil
}

// all reports whether the selector selects every result.
func (c *CaseSelector) all() bool {
	return c == nil || (c.Policy == "*" && c.Rule == "*" && c.Resource == "*")
}

// selectResults returns the results the selector picks, each narrowed to
// the resources it picks. Policies are matched by name (namespace/name
// keeps working), rules by name (an empty rule, meaning every rule, is
// picked by any rule selector), resources by name or namespace/name.
func (c *CaseSelector) selectResults(results []TestResult) []TestResult {
	if c.all() {
		return results
	}
	var out []TestResult
	for _, r := range results {
		if !wildcard.Match(c.Policy, r.PolicyName()) && !wildcard.Match(c.Policy, r.Policy) {
			continue
		}
		if r.Rule != "" && !wildcard.Match(c.Rule, r.Rule) {
			continue
		}
		if c.Resource != "*" {
			r.Resources = c.matching(r.Resources)
			if r.Resource != "" && !c.matchesResource(r.Resource) && !c.matchesResource(r.Namespace+"/"+r.Resource) {
				r.Resource = ""
			}
			var specs []ResourceSpec
			for _, spec := range r.ResourceSpecs {
				if c.matchesResource(spec.Name) || c.matchesResource(spec.Namespace+"/"+spec.Name) {
					specs = append(specs, spec)
				}
			}
			r.ResourceSpecs = specs
			if len(r.Resources) == 0 && r.Resource == "" && len(r.ResourceSpecs) == 0 {
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

func (c *CaseSelector) matching(resources []string) []string {
	var out []string
	for _, name := range resources {
		if c.matchesResource(name) {
			out = append(out, name)
		}
	}
	return out
}

// matchesResource matches a resource reference, name or namespace/name,
// by either form.
func (c *CaseSelector) matchesResource(ref string) bool {
	if wildcard.Match(c.Resource, ref) {
		return true
	}
	if _, name, ok := strings.Cut(ref, "/"); ok {
		return wildcard.Match(c.Resource, name)
	}
	return false
}
