package autogen

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"sigs.k8s.io/yaml"
)

func loadPolicy(t *testing.T, path string) kyvernov1.PolicyInterface {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var wrapper struct {
		Policy kyvernov1.ClusterPolicy `json:"policy"`
	}
	if err := yaml.Unmarshal(data, &wrapper); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &wrapper.Policy
}

// TestComputeRulesTyped runs every testdata case through the typed API:
// the names come out in Kyverno's order and the input stays untouched.
func TestComputeRulesTyped(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			policy := loadPolicy(t, file)
			before := policy.CreateDeepCopy()
			c := loadJSONCase(t, file)

			rules, err := ComputeRules(policy)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, r := range policy.GetSpec().Rules {
				if len(c.Want.Rules) == 0 || !IsGenerated(r.Name) {
					want = append(want, r.Name)
				}
			}
			for _, r := range c.Want.Rules {
				want = append(want, r["name"].(string))
			}
			var got []string
			for _, r := range rules {
				got = append(got, r.Name)
			}
			if !slices.Equal(want, got) {
				t.Errorf("rule names:\n want %v\n  got %v", want, got)
			}
			if !reflect.DeepEqual(before, policy) {
				t.Error("ComputeRules modified the policy")
			}
			if got, want := Controllers(policy), c.Want.Controllers; !(len(got) == 0 && len(want) == 0) && !slices.Equal(got, want) {
				t.Errorf("Controllers = %v, want %v", got, want)
			}
		})
	}
}

// TestGeneratedRulesDecode checks that generated rules survive the trip
// into the typed API with their content: pattern wrapped, kinds rewritten.
func TestGeneratedRulesDecode(t *testing.T) {
	policy := loadPolicy(t, "testdata/pattern-default-controllers.yaml")
	rules, err := GeneratedRules(policy)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 {
		t.Fatalf("got %d rules, want 2", len(rules))
	}
	if got := rules[1].MatchResources.Any[0].ResourceDescription.Kinds; !slices.Equal(got, []string{"batch/v1/CronJob"}) {
		t.Errorf("cronjob kinds = %v", got)
	}
	pattern, err := kyvernov1.FromJSON(rules[0].Validation.RawPattern)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "?*"}}}}}
	if !reflect.DeepEqual(pattern, want) {
		t.Errorf("pattern = %v", pattern)
	}
	if rules[0].Validation.AllowExistingViolations == nil || *rules[0].Validation.AllowExistingViolations {
		t.Error("allowExistingViolations: false was lost")
	}
}
