// Package policymix is what policies the admission benchmark installs:
// charter's Pod Security policies switched to Enforce, and generated
// copies of its library up to a count, most of them not matching the
// benchmark's Pods, as in a real cluster. It does not depend on the
// engine, so that the engine's own benchmarks can evaluate the same mix.
package policymix

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// MatchingEvery is how often a generated policy still matches the
// benchmark's Pods: one in MatchingEvery. Most policies of a real cluster
// concern other kinds or other teams' namespaces.
const MatchingEvery = 20

// otherKinds are what a generated policy that must not match a Pod
// matches instead, in turn.
var otherKinds = []string{"ConfigMap", "Service", "Secret", "ServiceAccount", "Role"}

// LibraryPolicies reads every ClusterPolicy of charter's library under
// dir (<dir>/**/<name>/<name>.yaml: validate, mutate and generate rules
// alike), sorted by name, unchanged.
func LibraryPolicies(dir string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || filepath.Base(path) != filepath.Base(filepath.Dir(path))+".yaml" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return fmt.Errorf("policy %s: %w", path, err)
		}
		if u.GetKind() == "ClusterPolicy" {
			out = append(out, u)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no ClusterPolicy found under %s (expected <name>/<name>.yaml files)", dir)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

// EnforcedPolicies reads every ClusterPolicy under dir laid out as
// charter's library is (<dir>/**/<name>/<name>.yaml; the kyverno-test.yaml
// and resources.yaml beside it are skipped) and switches it to Enforce:
// spec.validationFailureAction is set to Enforce and every rule-level
// validate.failureAction, which would win over it, is removed. The files
// are not changed. Policies come back sorted by name.
func EnforcedPolicies(dir string) ([]*unstructured.Unstructured, error) {
	out, err := LibraryPolicies(dir)
	if err != nil {
		return nil, err
	}
	for _, u := range out {
		if err := Enforce(u); err != nil {
			return nil, fmt.Errorf("policy %s: %w", u.GetName(), err)
		}
	}
	return out, nil
}

// Enforce sets the policy's failure action to Enforce in place.
func Enforce(u *unstructured.Unstructured) error { return setAction(u, kyvernov1.Enforce) }

// Typed converts policies read by EnforcedPolicies into the API types the
// engine compiles.
func Typed(policies []*unstructured.Unstructured) ([]kyvernov1.PolicyInterface, error) {
	out := make([]kyvernov1.PolicyInterface, 0, len(policies))
	for _, u := range policies {
		raw, err := json.Marshal(u.Object)
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", u.GetName(), err)
		}
		p := &kyvernov1.ClusterPolicy{}
		if err := json.Unmarshal(raw, p); err != nil {
			return nil, fmt.Errorf("policy %s: %w", u.GetName(), err)
		}
		out = append(out, p)
	}
	return out, nil
}

// ScaledPolicies returns enforced followed by generated policies up to n
// in all: copies of library's policies taken in turn, each renamed
// <name>-g<i>, its validate rules in Audit so that no decision changes.
// One copy in MatchingEvery is left matching what it matched; of the
// others, half match another kind (ConfigMap, Service, ...) and half the
// same kinds in a namespace of their own (team-<i>), as a team's policy
// does: neither applies to the benchmark's Pods, but the second kind
// still costs a namespace check per request. Asking for fewer than
// len(enforced) is an error: the decisions the benchmark checks come from
// them.
func ScaledPolicies(enforced, library []*unstructured.Unstructured, n int) ([]*unstructured.Unstructured, error) {
	if n < len(enforced) {
		return nil, fmt.Errorf("%d policies: want at least the %d enforced ones", n, len(enforced))
	}
	if len(library) == 0 && n > len(enforced) {
		return nil, fmt.Errorf("%d policies: no library policies to copy", n)
	}
	out := make([]*unstructured.Unstructured, 0, n)
	out = append(out, enforced...)
	for i := range n - len(enforced) {
		p := library[i%len(library)].DeepCopy()
		p.SetName(p.GetName() + "-g" + strconv.Itoa(i))
		if err := audit(p); err != nil {
			return nil, fmt.Errorf("policy %s: %w", p.GetName(), err)
		}
		// k numbers the copies that must not match, so that they split
		// evenly between the two ways.
		k := i - i/MatchingEvery - 1
		switch {
		case i%MatchingEvery == 0:
		case k%2 == 0:
			if err := rewriteMatch(p, func(r map[string]any) { r["kinds"] = []any{otherKinds[k/2%len(otherKinds)]} }); err != nil {
				return nil, fmt.Errorf("policy %s: %w", p.GetName(), err)
			}
		default:
			ns := "team-" + strconv.Itoa(i)
			if err := rewriteMatch(p, func(r map[string]any) { r["namespaces"] = []any{ns} }); err != nil {
				return nil, fmt.Errorf("policy %s: %w", p.GetName(), err)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// audit sets the policy's failure action to Audit in place.
func audit(u *unstructured.Unstructured) error { return setAction(u, kyvernov1.Audit) }

// setAction sets the policy's failure action in place, removing the
// rule-level ones that would win over it.
func setAction(u *unstructured.Unstructured, action kyvernov1.ValidationFailureAction) error {
	if err := unstructured.SetNestedField(u.Object, string(action), "spec", "validationFailureAction"); err != nil {
		return err
	}
	return eachRule(u, func(rule map[string]any) {
		if v, ok := rule["validate"].(map[string]any); ok {
			delete(v, "failureAction")
		}
	})
}

// rewriteMatch calls edit on every resource filter of every rule's match
// block (match.resources, match.any[].resources, match.all[].resources).
func rewriteMatch(u *unstructured.Unstructured, edit func(resources map[string]any)) error {
	return eachRule(u, func(rule map[string]any) {
		match, _ := rule["match"].(map[string]any)
		if r, ok := match["resources"].(map[string]any); ok {
			edit(r)
		}
		for _, list := range []string{"any", "all"} {
			filters, _ := match[list].([]any)
			for _, f := range filters {
				if fm, ok := f.(map[string]any); ok {
					if r, ok := fm["resources"].(map[string]any); ok {
						edit(r)
					}
				}
			}
		}
	})
}

func eachRule(u *unstructured.Unstructured, do func(rule map[string]any)) error {
	rules, _, err := unstructured.NestedSlice(u.Object, "spec", "rules")
	if err != nil {
		return fmt.Errorf("spec.rules: %w", err)
	}
	for _, r := range rules {
		if rule, ok := r.(map[string]any); ok {
			do(rule)
		}
	}
	return unstructured.SetNestedSlice(u.Object, rules, "spec", "rules")
}
