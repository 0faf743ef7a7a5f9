package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/api/versions"
	"github.com/charter-dev/charter/engine/fault"
)

// validationCase is one testdata/validation/*.yaml file: one policy that
// Kyverno 1.19 refuses at admission (field and message), or admits with a
// warning (warning). docs/policy-validation.md lists each file.
type validationCase struct {
	// Kyverno names the check: its source file and its message.
	Kyverno string `json:"kyverno"`
	// Charter, when set, says where charter deliberately does better than
	// Kyverno (the spec marks those) and how.
	Charter string `json:"charter,omitempty"`
	// Field is the path the refusal must name, exactly.
	Field string `json:"field,omitempty"`
	// Message is a part of the refusal's text.
	Message string `json:"message,omitempty"`
	// Cluster marks a check only the cluster makes (ClusterFaults): the
	// CLI runs the policy, as a values file may define what it names.
	Cluster bool `json:"cluster,omitempty"`
	// Discovery marks a check that asks the cluster's discovery
	// (clusterstate/policycheck.KindFaults): the engine alone admits the
	// policy, knowing no cluster.
	Discovery bool `json:"discovery,omitempty"`
	// Warning is a warning the admitted policy must be given.
	Warning string          `json:"warning,omitempty"`
	Policy  json.RawMessage `json:"policy"`
}

// TestKyvernoPolicyValidation: every policy of testdata/validation is
// refused by Compile (or, for a cluster case, by ClusterFaults) with a
// fault naming the expected field, or, for a warning case, compiles and
// is given the warning by PolicyWarnings. A discovery case compiles: only
// the cluster's discovery refuses it (its admission and GitOps tests).
// Admission, the GitOps pre-apply check and the CLI all compile through
// Compile; their own tests run the same files.
func TestKyvernoPolicyValidation(t *testing.T) {
	eachCase(t, "validation", func(t *testing.T, tc *validationCase) {
		if tc.Kyverno == "" || (tc.Field == "") == (tc.Warning == "") {
			t.Fatal("a case names its Kyverno check and either field (and message) or warning")
		}
		if cleanup, ok := decodeAny(t, tc.Policy).(kyvernov2.CleanupPolicyInterface); ok {
			// Cleanup policies and DeletingPolicies compile as the cleanup
			// controller compiles them.
			_, err := CompileCleanupPolicy(cleanup)
			if tc.Discovery {
				if err != nil {
					t.Fatalf("a discovery case compiles without a cluster: %v", err)
				}
				return
			}
			faults, _ := err.(fault.List)
			for _, f := range faults {
				if f.Field == tc.Field && strings.Contains(strings.ToLower(f.Fault), strings.ToLower(tc.Message)) {
					return
				}
			}
			t.Fatalf("want a refusal at %s with %q, got %v", tc.Field, tc.Message, err)
		}
		policies := decodeAnyPolicies(t, []json.RawMessage{tc.Policy})
		_, err := Compile(policies)
		if err == nil {
			if faults := ClusterFaults(policies[0]); len(faults) > 0 {
				err = faults
			}
		}
		if tc.Discovery {
			// Only the cluster knows which kinds it serves.
			if err != nil {
				t.Fatalf("a discovery case compiles without a cluster: %v", err)
			}
			return
		}
		if tc.Warning != "" {
			if err != nil {
				t.Fatalf("a warning case must compile: %v", err)
			}
			warnings := PolicyWarnings(policies[0])
			for _, w := range warnings {
				if strings.Contains(w, tc.Warning) {
					return
				}
			}
			t.Fatalf("warnings %q lack %q", warnings, tc.Warning)
		}
		faults, ok := err.(fault.List)
		if !ok || len(faults) == 0 {
			t.Fatalf("admitted; want a refusal at %s: %s (err %v)", tc.Field, tc.Message, err)
		}
		for _, f := range faults {
			if f.Field == tc.Field && strings.Contains(strings.ToLower(f.Fault), strings.ToLower(tc.Message)) {
				return
			}
		}
		t.Fatalf("refused, but not at %s with %q:\n%v", tc.Field, tc.Message, err)
	})
}

// decodeAny decodes an object of any served kind and version into its
// hub type.
func decodeAny(t testing.TB, raw json.RawMessage) runtime.Object {
	t.Helper()
	var probe struct{ APIVersion, Kind string }
	if err := json.Unmarshal(raw, &probe); err != nil {
		t.Fatal(err)
	}
	gv, err := schema.ParseGroupVersion(probe.APIVersion)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := versions.Decode(gv.WithKind(probe.Kind), raw)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// decodeAnyPolicies decodes policies of any served kind and version into
// their hub types, as admission and the GitOps check do.
func decodeAnyPolicies(t testing.TB, raws []json.RawMessage) []kyvernov1.PolicyInterface {
	t.Helper()
	var out []kyvernov1.PolicyInterface
	for _, raw := range raws {
		p, ok := decodeAny(t, raw).(kyvernov1.PolicyInterface)
		if !ok {
			t.Fatalf("%s is not a policy", raw)
		}
		out = append(out, p)
	}
	return out
}
