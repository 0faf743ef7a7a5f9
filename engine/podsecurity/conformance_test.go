package podsecurity

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/internal/corpus"
)

// podSecuritySuites are the suites whose policies use validate.podSecurity.
var podSecuritySuites = []string{
	"pod-security/subrule/podsecurity-subrule-baseline",
	"pod-security/subrule/restricted/restricted-latest",
	"pod-security/subrule/restricted/restricted-exclude-capabilities",
	"pod-security/subrule/restricted/restricted-exclude-seccomp",
}

// TestConformanceVerdicts evaluates every resource each suite lists with
// the podSecurity rule of its policy and checks the expected pass/fail.
func TestConformanceVerdicts(t *testing.T) {
	conformanceRoot := filepath.Join(corpus.Require(t), "kyverno-policies")
	checked := 0
	for _, suite := range podSecuritySuites {
		t.Run(suite, func(t *testing.T) {
			dir := filepath.Join(conformanceRoot, suite, ".kyverno-test")
			var test struct {
				Policies  []string `json:"policies"`
				Resources []string `json:"resources"`
				Results   []struct {
					Rule      string   `json:"rule"`
					Resources []string `json:"resources"`
					Result    string   `json:"result"`
				} `json:"results"`
			}
			readYAML(t, filepath.Join(dir, "kyverno-test.yaml"), &test)

			var policy struct {
				Spec struct {
					Rules []struct {
						Name     string `json:"name"`
						Validate struct {
							PodSecurity struct {
								Level   string    `json:"level"`
								Version string    `json:"version"`
								Exclude []Exclude `json:"exclude"`
							} `json:"podSecurity"`
						} `json:"validate"`
					} `json:"rules"`
				} `json:"spec"`
			}
			readYAML(t, filepath.Join(dir, test.Policies[0]), &policy)

			resources := map[string]map[string]any{}
			for _, file := range test.Resources {
				data, err := os.ReadFile(filepath.Join(dir, file))
				if err != nil {
					t.Fatal(err)
				}
				for _, doc := range bytes.Split(data, []byte("\n---")) {
					var obj map[string]any
					if err := yaml.Unmarshal(doc, &obj); err != nil {
						t.Fatal(err)
					}
					if obj == nil {
						continue
					}
					name, _ := obj["metadata"].(map[string]any)["name"].(string)
					resources[name] = obj
				}
			}

			for _, want := range test.Results {
				var found bool
				for _, rule := range policy.Spec.Rules {
					if rule.Name != want.Rule {
						continue
					}
					found = true
					ps := rule.Validate.PodSecurity
					for _, name := range want.Resources {
						obj, ok := resources[name]
						if !ok {
							t.Fatalf("resource %q not found", name)
						}
						meta, spec, ok, err := PodTemplate(obj)
						if err != nil || !ok {
							t.Fatalf("%s: no pod (%v)", name, err)
						}
						res, err := Evaluate(meta, spec, ps.Level, ps.Version, ps.Exclude)
						if err != nil {
							t.Fatal(err)
						}
						got := "pass"
						if !res.Allowed() {
							got = "fail"
						}
						if got != want.Result {
							t.Errorf("%s: %s, want %s: %s", name, got, want.Result, res.Message(rule.Name))
						}
						checked++
					}
				}
				if !found {
					t.Fatalf("rule %q not in policy", want.Rule)
				}
			}
		})
	}
	if checked == 0 {
		t.Fatal("nothing checked")
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
