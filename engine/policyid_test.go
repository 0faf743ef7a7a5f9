package engine

import (
	"context"
	"errors"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/review"
)

// TestSameNamePolicies compiles every ordered pair of policies of one
// scope (cluster-wide, or namespace team) that share a name and differ in
// kind, as a user moving a ClusterPolicy to a ValidatingPolicy one policy
// at a time has them: both are in the set, each under its own ID with the
// shared key, and each answers the Pod its rules select.
func TestSameNamePolicies(t *testing.T) {
	policies, _ := readCELPolicies(t, "policyid/same-name.yaml")
	var cluster, namespaced []kyvernov1.PolicyInterface
	for _, p := range policies {
		if p.IsNamespaced() {
			namespaced = append(namespaced, p)
		} else {
			cluster = append(cluster, p)
		}
	}
	if len(cluster) != 5 || len(namespaced) != 5 {
		t.Fatalf("testdata holds %d cluster-wide and %d namespaced policies, want 5 of each", len(cluster), len(namespaced))
	}
	req := &review.Request{Operation: kyvernov1.Create, Object: pod("team", "web", nil, "nginx")}
	for _, scope := range [][]kyvernov1.PolicyInterface{cluster, namespaced} {
		for _, a := range scope {
			for _, b := range scope {
				if a == b {
					continue
				}
				t.Run(a.GetKind()+"+"+b.GetKind(), func(t *testing.T) {
					set, err := Compile([]kyvernov1.PolicyInterface{a, b})
					if err != nil {
						t.Fatalf("Compile: %v", err)
					}
					if policyid.Key(a) != policyid.Key(b) || policyid.Of(a) == policyid.Of(b) {
						t.Fatalf("keys %q, %q and IDs %q, %q: want one key, two IDs", policyid.Key(a), policyid.Key(b), policyid.Of(a), policyid.Of(b))
					}
					answered := answeringPolicies(set, req)
					for _, p := range []kyvernov1.PolicyInterface{a, b} {
						compiled, ok := set.Lookup(policyid.Of(p))
						if !ok || compiled.Source() != p {
							t.Fatalf("Lookup(%q) does not find the %s", policyid.Of(p), p.GetKind())
						}
						if compiled.Key() != policyid.Key(p) || compiled.ID() != policyid.Of(p) {
							t.Errorf("%s compiled with key %q, ID %q", p.GetKind(), compiled.Key(), compiled.ID())
						}
						if !answered[policyid.Of(p)] {
							t.Errorf("the %s did not answer the Pod; answered: %v", p.GetKind(), answered)
						}
					}
				})
			}
		}
	}
}

// answeringPolicies returns the IDs of the policies with a response to req
// from any entry point: validate (and verify images), mutate, generate.
// Each response's Key must be the shared key.
func answeringPolicies(set *PolicySet, req *review.Request) map[string]bool {
	ctx := context.Background()
	out := map[string]bool{}
	var all []review.PolicyResponse
	all = append(all, set.Validate(ctx, req).Policies...)
	all = append(all, set.Mutate(ctx, req).Policies...)
	all = append(all, set.Generate(ctx, req).Policies...)
	for i := range all {
		if len(all[i].Rules) > 0 {
			out[all[i].ID()] = true
		}
	}
	return out
}

// TestSameNameResponsesStaySeparate evaluates a ClusterPolicy and a
// ValidatingPolicy of one name that both deny a Pod: the response holds
// each one's verdict under the shared key, with its own message.
func TestSameNameResponsesStaySeparate(t *testing.T) {
	policies, _ := readCELPolicies(t, "policyid/same-name.yaml")
	var pair []kyvernov1.PolicyInterface
	for _, p := range policies {
		if k := p.GetKind(); k == kyvernov1.ClusterPolicyKind || k == "ValidatingPolicy" {
			pair = append(pair, p)
		}
	}
	set, err := Compile(pair)
	if err != nil {
		t.Fatal(err)
	}
	resp := set.Validate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: pod("team", "web", nil, "nginx")})
	if !resp.Blocked() {
		t.Fatal("the Pod is not denied")
	}
	got := map[string]string{}
	for i := range resp.Policies {
		pr := &resp.Policies[i]
		if pr.Key != "same" {
			t.Errorf("response key %q, want the bare name", pr.Key)
		}
		for _, rr := range pr.Rules {
			got[pr.Policy.GetKind()] = string(rr.Status) + ": " + rr.Message
		}
	}
	want := map[string]string{
		"ClusterPolicy":    "fail: validation error: ClusterPolicy-style rule wants a team label. rule team-label failed at path /metadata/labels/",
		"ValidatingPolicy": "fail: ValidatingPolicy wants an owner label",
	}
	for kind, w := range want {
		if got[kind] != w {
			t.Errorf("%s: got %q, want %q", kind, got[kind], w)
		}
	}
}

// TestSamePolicyTwice: two objects of one kind and name (the CLI can read
// them from two files) are still a duplicate, and only the first serves.
func TestSamePolicyTwice(t *testing.T) {
	policies, _ := readCELPolicies(t, "policyid/same-name.yaml")
	for _, p := range policies {
		t.Run(p.GetKind(), func(t *testing.T) {
			set, err := Compile([]kyvernov1.PolicyInterface{p, p})
			var faults fault.List
			if !errors.As(err, &faults) || len(faults) != 1 || faults[0].Fault != faultDuplicatePolicy ||
				faults[0].Kind != p.GetKind() || faults[0].Name != policyid.Key(p) {
				t.Fatalf("Compile of the %s twice: %v, want one %q fault naming it", p.GetKind(), err, faultDuplicatePolicy)
			}
			if n := len(set.Policies()); n != 1 {
				t.Errorf("%d policies served, want 1", n)
			}
		})
	}
}
