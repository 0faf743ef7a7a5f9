package engine

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// TestBackgroundPolicies: the set lists the policies with a generate or a
// mutate-existing rule, and no other, for the admission server's check on
// every admitted request.
func TestBackgroundPolicies(t *testing.T) {
	var policies []kyvernov1.PolicyInterface
	for _, file := range []string{
		"testdata/generate/trigger-gone.yaml",           // generate: labelled
		"testdata/mutate/targets.yaml",                  // mutate-existing: refresh-secrets
		"testdata/mutate/chain-rules-and-policies.yaml", // mutate of the object only
		"testdata/scope/match-namespaces.yaml",          // validate only
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Policies []json.RawMessage `json:"policies"`
		}
		if err := yaml.Unmarshal(data, &f); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		policies = append(policies, decodePolicies(t, f.Policies)...)
	}
	set, err := Compile(policies)
	if err != nil {
		t.Fatal(err)
	}
	got := policyKeys(set.BackgroundPolicies())
	if want := []string{"labelled", "refresh-secrets"}; !slices.Equal(got, want) {
		t.Errorf("background policies %v, want %v (of %d policies)", got, want, len(set.Policies()))
	}
}
