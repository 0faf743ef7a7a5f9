package autogen

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/internal/corpus"
)

// conformanceSuites are suites whose results name Pod controllers, either by
// an explicit autogen-* rule name or by the source rule name on a
// Deployment/CronJob resource.
var conformanceSuites = []string{
	"other/limit-containers-per-pod",
	"other/memory-requests-equal-limits",
	"best-practices/require-probes",
	"pod-security/baseline/*",
	"pod-security/restricted/*",
	"pod-security-cel/baseline/*",
	"pod-security-cel/restricted/*",
	"best-practices-cel/disallow-latest-tag",
	"best-practices-cel/disallow-default-namespace",
}

type kyvernoTest struct {
	Policies []string `json:"policies"`
	Results  []struct {
		Kind   string `json:"kind"`
		Policy string `json:"policy"`
		Rule   string `json:"rule"`
	} `json:"results"`
}

// TestConformanceRuleNames checks, for every expected result on a Pod
// controller in the suites above, that autogen produces a rule with the
// name the suite expects (autogen-<rule> for the template controllers,
// autogen-cronjob-<rule> for CronJob) and that it matches that kind.
func TestConformanceRuleNames(t *testing.T) {
	conformanceRoot := filepath.Join(corpus.Require(t), "kyverno-policies")
	var dirs []string
	for _, pattern := range conformanceSuites {
		matches, err := filepath.Glob(filepath.Join(conformanceRoot, pattern))
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, matches...)
	}
	checked := 0
	for _, dir := range dirs {
		testFile := filepath.Join(dir, ".kyverno-test", "kyverno-test.yaml")
		data, err := os.ReadFile(testFile)
		if err != nil {
			continue // a kustomization.yaml or other file matched the glob
		}
		rel, _ := filepath.Rel(conformanceRoot, dir)
		t.Run(rel, func(t *testing.T) {
			var suite kyvernoTest
			if err := yaml.Unmarshal(data, &suite); err != nil {
				t.Fatal(err)
			}
			rulesByPolicy := map[string][]kyvernov1.Rule{}
			for _, p := range suite.Policies {
				for _, policy := range loadPolicies(t, filepath.Join(dir, ".kyverno-test", p)) {
					rules, err := ComputeRules(policy)
					if err != nil {
						t.Fatalf("%s: %v", policy.GetName(), err)
					}
					rulesByPolicy[policy.GetName()] = rules
				}
			}
			for _, r := range suite.Results {
				if r.Kind == "Pod" || !slices.Contains(DefaultControllers, r.Kind) {
					continue
				}
				rules, ok := rulesByPolicy[r.Policy]
				if !ok {
					t.Fatalf("policy %q not loaded", r.Policy)
				}
				candidates := []string{r.Rule}
				if !IsGenerated(r.Rule) {
					if r.Kind == CronJob {
						candidates = append(candidates, generatedName("autogen-cronjob", r.Rule))
					} else {
						candidates = append(candidates, generatedName("autogen", r.Rule))
					}
				}
				found := false
				for _, rule := range rules {
					if slices.Contains(candidates, rule.Name) && containsKind(rule.MatchResources.GetKinds(), r.Kind) {
						found = true
					}
				}
				if !found {
					var names []string
					for _, rule := range rules {
						names = append(names, rule.Name)
					}
					t.Errorf("%s on %s: no rule among %v matching %s; computed rules %v", r.Policy, r.Kind, candidates, r.Kind, names)
				}
				checked++
			}
		})
	}
	if checked == 0 {
		t.Fatal("no controller results checked")
	}
	t.Logf("checked %d expected results on Pod controllers", checked)
}

func loadPolicies(t *testing.T, path string) []kyvernov1.PolicyInterface {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []kyvernov1.PolicyInterface
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var head struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch strings.TrimSpace(head.Kind) {
		case "ClusterPolicy":
			var p kyvernov1.ClusterPolicy
			if err := yaml.Unmarshal(doc, &p); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			out = append(out, &p)
		case "Policy":
			var p kyvernov1.Policy
			if err := yaml.Unmarshal(doc, &p); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			out = append(out, &p)
		}
	}
	return out
}
