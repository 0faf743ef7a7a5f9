// Package workload is what the admission benchmark sends and enforces:
// charter's Pod Security policies switched to Enforce, and Pods that pass
// or fail them, each with the decision charter must reach.
package workload

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate/policycache"
)

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
		if err := enforce(u); err != nil {
			return nil, fmt.Errorf("policy %s: %w", u.GetName(), err)
		}
	}
	return out, nil
}

// enforce sets the policy's failure action to Enforce in place.
func enforce(u *unstructured.Unstructured) error {
	if err := unstructured.SetNestedField(u.Object, string(kyvernov1.Enforce), "spec", "validationFailureAction"); err != nil {
		return err
	}
	rules, _, err := unstructured.NestedSlice(u.Object, "spec", "rules")
	if err != nil {
		return fmt.Errorf("spec.rules: %w", err)
	}
	for _, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			continue
		}
		if v, ok := rule["validate"].(map[string]any); ok {
			delete(v, "failureAction")
		}
	}
	return unstructured.SetNestedSlice(u.Object, rules, "spec", "rules")
}

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

// Snapshot compiles policies into the snapshot charter's admission server
// evaluates, and fails when any of them does not compile: a benchmark of
// a policy set that is only partly enforced would measure the wrong thing.
func Snapshot(policies []kyvernov1.PolicyInterface) (*policycache.Snapshot, error) {
	s, err := policycache.Build(policies, nil)
	if err != nil {
		return nil, err
	}
	if len(s.Errors) > 0 {
		return nil, fmt.Errorf("policies do not compile: %w", s.Errors)
	}
	return s, nil
}

// Fixed serves one snapshot for ever: the admission server's policy
// source without informers.
type Fixed struct{ S *policycache.Snapshot }

// Snapshot implements server.Snapshots.
func (f Fixed) Snapshot() *policycache.Snapshot { return f.S }

// SnapshotOf is Typed then Snapshot: the policies read from files,
// compiled into the snapshot charter's admission server evaluates.
func SnapshotOf(policies []*unstructured.Unstructured) (*policycache.Snapshot, error) {
	typed, err := Typed(policies)
	if err != nil {
		return nil, err
	}
	return Snapshot(typed)
}
