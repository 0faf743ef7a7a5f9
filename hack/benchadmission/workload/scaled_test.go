package workload

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/charter-dev/charter/hack/benchadmission/policymix"
	"github.com/charter-dev/charter/webhook/server"
)

const libraryDir = "../../../policies"

// TestScaledPolicies builds each size bench-scale measures and wants: the
// enforced set first, unique names, every policy compiling, the shares of
// generated copies as documented (one in MatchingEvery unchanged, the
// others half on another kind, half in a namespace of their own), and
// every benchmark Pod still getting its decision.
func TestScaledPolicies(t *testing.T) {
	enforced, err := policymix.EnforcedPolicies(policyDir)
	if err != nil {
		t.Fatal(err)
	}
	library, err := policymix.LibraryPolicies(libraryDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{len(enforced), 20, 200, 1000} {
		t.Run("n"+strconv.Itoa(n), func(t *testing.T) {
			policies, err := policymix.ScaledPolicies(enforced, library, n)
			if err != nil {
				t.Fatal(err)
			}
			if len(policies) != n {
				t.Fatalf("%d policies, want %d", len(policies), n)
			}
			names := map[string]bool{}
			for i, p := range policies {
				if names[p.GetName()] {
					t.Errorf("policy name %s twice", p.GetName())
				}
				names[p.GetName()] = true
				if i < len(enforced) && p != enforced[i] {
					t.Errorf("policy %d is %s, want the enforced %s first", i, p.GetName(), enforced[i].GetName())
				}
			}
			var unchanged, otherKind, otherNamespace int
			for i, p := range policies[len(enforced):] {
				if got, _, _ := unstructured.NestedString(p.Object, "spec", "validationFailureAction"); got != "Audit" {
					t.Errorf("%s: validationFailureAction %q, want Audit", p.GetName(), got)
				}
				orig := library[i%len(library)]
				switch {
				case reflect.DeepEqual(matches(orig), matches(p)):
					unchanged++
				case strings.Contains(matchesString(p), "team-"):
					otherNamespace++
				default:
					otherKind++
				}
			}
			generated := n - len(enforced)
			wantUnchanged := (generated + policymix.MatchingEvery - 1) / policymix.MatchingEvery
			if unchanged != wantUnchanged {
				t.Errorf("%d generated policies left matching, want %d of %d", unchanged, wantUnchanged, generated)
			}
			if diff := otherKind - otherNamespace; diff < -1 || diff > 1 {
				t.Errorf("%d on another kind, %d in another namespace: want about half each", otherKind, otherNamespace)
			}
			snapshot, err := SnapshotOf(policies)
			if err != nil {
				t.Fatal(err)
			}
			h := server.NewHandler(server.Options{Policies: Fixed{snapshot}})
			for _, p := range Pods("bench") {
				if allowed, msg := decide(t, h, p); allowed != p.Compliant {
					t.Errorf("Pod %s: allowed = %v, want %v; %s", p.Pod.Name, allowed, p.Compliant, msg)
				}
			}
		})
	}
}

func TestScaledPoliciesRefusesFewerThanEnforced(t *testing.T) {
	enforced, err := policymix.EnforcedPolicies(policyDir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = policymix.ScaledPolicies(enforced, nil, len(enforced)-1)
	if err == nil || !strings.Contains(err.Error(), "want at least the 17 enforced ones") {
		t.Fatalf("err = %v, want one naming the enforced count", err)
	}
	if _, err := policymix.ScaledPolicies(enforced, nil, len(enforced)+1); err == nil || !strings.Contains(err.Error(), "no library policies") {
		t.Fatalf("err = %v, want one saying there is nothing to copy", err)
	}
}

// matches returns the match blocks of p's rules.
func matches(p *unstructured.Unstructured) []any {
	rules, _, _ := unstructured.NestedSlice(p.Object, "spec", "rules")
	out := make([]any, len(rules))
	for i, r := range rules {
		out[i] = r.(map[string]any)["match"]
	}
	return out
}

func matchesString(p *unstructured.Unstructured) string {
	var b strings.Builder
	for _, m := range matches(p) {
		b.WriteString(fmt.Sprint(m))
	}
	return b.String()
}
