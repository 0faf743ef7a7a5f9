package generate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/internal/corpus"
)

// kyvernoTest is the part of a cli.kyverno.io/v1alpha1 Test this check
// reads.
type kyvernoTest struct {
	Policies  []string `json:"policies"`
	Resources []string `json:"resources"`
	Results   []struct {
		Policy              string   `json:"policy"`
		Rule                string   `json:"rule"`
		Resources           []string `json:"resources"`
		GeneratedResource   string   `json:"generatedResource"`
		CloneSourceResource string   `json:"cloneSourceResource"`
	} `json:"results"`
}

// TestConformanceGenerateSuites runs the generate suites of
// shared/conformance/suites/generate.txt through Generate directly: for
// each result with a generatedResource, the rule runs on the named trigger
// (with the suite's cloneSourceResource as cluster objects), and every
// generated object must equal the document of the same apiVersion, kind,
// namespace and name in the expected file, compared as kyverno test does
// (§9.4, §9.2): generate.kyverno.io labels dropped, managed-by defaulted,
// nulls and empty maps and lists dropped, then exact equality. A generated
// object missing from the file fails, as in Kyverno.
func TestConformanceGenerateSuites(t *testing.T) {
	conformanceDir := corpus.Require(t)
	list, err := os.ReadFile(filepath.Join(conformanceDir, "suites", "generate.txt"))
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, line := range strings.Split(string(list), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		t.Run(strings.TrimPrefix(line, "kyverno-policies/"), func(t *testing.T) {
			compared += runGenerateSuite(t, filepath.Join(conformanceDir, line))
		})
	}
	if compared == 0 {
		t.Fatal("no generated resource was compared")
	}
}

func runGenerateSuite(t *testing.T, dir string) int {
	var suite kyvernoTest
	data, err := os.ReadFile(filepath.Join(dir, "kyverno-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yamlUnmarshal(data, &suite); err != nil {
		t.Fatal(err)
	}
	policies := map[string]*kyvernov1.ClusterPolicy{}
	for _, p := range suite.Policies {
		for _, obj := range readObjects(t, filepath.Join(dir, p)) {
			var cp kyvernov1.ClusterPolicy
			if err := fromJSONValue(obj, &cp); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			policies[cp.Name] = &cp
		}
	}
	var triggers []map[string]any
	for _, r := range suite.Resources {
		triggers = append(triggers, readObjects(t, filepath.Join(dir, r))...)
	}
	compared := 0
	for _, res := range suite.Results {
		if res.GeneratedResource == "" {
			continue
		}
		policy := policies[res.Policy]
		if policy == nil {
			t.Fatalf("policy %q not in the suite", res.Policy)
		}
		var rule *kyvernov1.Rule
		for i := range policy.Spec.Rules {
			if policy.Spec.Rules[i].Name == res.Rule {
				rule = &policy.Spec.Rules[i]
			}
		}
		if rule == nil || rule.Generation == nil {
			t.Fatalf("policy %q has no generate rule %q", res.Policy, res.Rule)
		}
		if err := Check(rule, CheckOptions{PolicyNamespace: policy.Namespace}); err != nil {
			t.Fatalf("Check: %v", err)
		}
		var sources []map[string]any
		if res.CloneSourceResource != "" {
			sources = readObjects(t, filepath.Join(dir, res.CloneSourceResource))
		}
		expected := readObjects(t, filepath.Join(dir, res.GeneratedResource))
		for _, name := range res.Resources {
			trigger := findTrigger(triggers, name)
			if trigger == nil {
				t.Fatalf("trigger %q not in the suite's resources", name)
			}
			doc := triggerDocument(t, trigger, rule)
			got, err := Generate(context.Background(), PolicyRef{Name: policy.Name}, rule, RefOf(trigger), doc, Env{Objects: NewObjects(sources...)})
			if err != nil {
				t.Fatalf("%s/%s on %s: %v", res.Policy, res.Rule, name, err)
			}
			if len(got) == 0 {
				t.Fatalf("%s/%s on %s: nothing generated", res.Policy, res.Rule, name)
			}
			for _, d := range got {
				want := findExpected(expected, d.Ref())
				if want == nil {
					t.Errorf("%s/%s on %s: generated %s not found in %s", res.Policy, res.Rule, name, d.Ref(), res.GeneratedResource)
					continue
				}
				if diff := diffJSON(t, testComparable(t, d.Object), testComparable(t, want)); diff != "" {
					t.Errorf("%s/%s on %s: %s differs from %s:\n%s", res.Policy, res.Rule, name, d.Ref(), res.GeneratedResource, diff)
				}
				compared++
			}
		}
	}
	return compared
}

// findTrigger finds a resource by "name" or "namespace/name", as a results
// entry names it.
func findTrigger(objs []map[string]any, name string) map[string]any {
	ns, n, hasNS := strings.Cut(name, "/")
	if !hasNS {
		n = name
	}
	for _, obj := range objs {
		ref := RefOf(obj)
		if ref.Name == n && (!hasNS || ref.Namespace == ns) {
			return obj
		}
	}
	return nil
}

// findExpected finds the expected document of a generated object by
// apiVersion, kind, namespace and name; a namespaced kind written without a
// namespace is in "default", as the CLI loads it.
func findExpected(objs []map[string]any, ref ObjectRef) map[string]any {
	for _, obj := range objs {
		r := RefOf(obj)
		if r.Namespace == "" {
			if cluster, known := KnownScope(r.APIVersion, r.Kind); !known || !cluster {
				r.Namespace = "default"
			}
		}
		if r.APIVersion == ref.APIVersion && r.Kind == ref.Kind && r.Namespace == ref.Namespace && r.Name == ref.Name {
			return obj
		}
	}
	return nil
}

// testComparable is an object as kyverno test compares it (§9.2): every
// generate.kyverno.io label removed, managed-by defaulted to kyverno, then
// nulls, empty maps and empty lists dropped recursively.
func testComparable(t *testing.T, obj map[string]any) any {
	t.Helper()
	m := jsonValue(t, obj).(map[string]any)
	meta := metadataOf(m)
	labels, _ := meta["labels"].(map[string]any)
	out := map[string]any{}
	for k, v := range labels {
		if !strings.HasPrefix(k, LabelPrefix) {
			out[k] = v
		}
	}
	if _, ok := out[LabelManagedBy]; !ok {
		out[LabelManagedBy] = ManagedBy
	}
	meta["labels"] = out
	return tidy(m)
}

func tidy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			if e = tidy(e); e != nil {
				out[k] = e
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		var out []any
		for _, e := range t {
			if e = tidy(e); e != nil {
				out = append(out, e)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	default:
		return v
	}
}
