package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/api/versions"
	"github.com/charter-dev/charter/engine/cleanup"
	"github.com/charter-dev/charter/engine/cpol"
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
		var err error
		switch obj := decodeAny(t, tc.Policy).(type) {
		case kyvernov2.CleanupPolicyInterface:
			// Cleanup policies and DeletingPolicies compile as the cleanup
			// controller compiles them.
			_, err = cleanup.Compile(obj)
		case *kyvernov2.PolicyException:
			_, err = Compile(nil, WithExceptions([]*kyvernov2.PolicyException{obj}))
		case *policiesv1.PolicyException:
			_, err = Compile(nil, WithCELExceptions([]*policiesv1.PolicyException{obj}))
		case *kyvernov2alpha1.GlobalContextEntry:
			// The engine reads GlobalContextEntries and does not judge
			// them: their checks are the api type's (clusterstate's
			// globalcontext.Check adds the JMESPath compile), asked here
			// as admission, the GitOps check and the Store ask them.
			err = entryFaults(obj)
		case kyvernov1.PolicyInterface:
			policies := []kyvernov1.PolicyInterface{obj}
			if _, err = Compile(policies); err == nil {
				if faults := cpol.ClusterFaults(obj); len(faults) > 0 {
					err = faults
				}
			}
			if tc.Warning != "" && !tc.Discovery {
				if err != nil {
					t.Fatalf("a warning case must compile: %v", err)
				}
				warnings := cpol.Warnings(obj)
				for _, w := range warnings {
					if strings.Contains(w, tc.Warning) {
						return
					}
				}
				t.Fatalf("warnings %q lack %q", warnings, tc.Warning)
			}
		default:
			t.Fatalf("%T: the runner does not know this kind", obj)
		}
		if tc.Discovery {
			// Only the cluster knows which kinds it serves.
			if err != nil {
				t.Fatalf("a discovery case compiles without a cluster: %v", err)
			}
			return
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

// entryFaults are the faults the api type finds in a GlobalContextEntry;
// nil when there are none.
func entryFaults(e *kyvernov2alpha1.GlobalContextEntry) error {
	if faults := fault.Parse(kyvernov2alpha1.GlobalContextEntryKind, e.Name, e.Spec.ValidateNamed(e.Name)); len(faults) > 0 {
		return faults
	}
	return nil
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
