package mutate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/internal/corpus"
)

// TestConformancePatchStrategicMerge replays the corpus's mutate suites whose rules
// this package can run on its own: patchStrategicMerge rules without variables,
// preconditions, exclusions or foreach, matched by kind alone, on resources of a
// matched kind (no autogen). Each listed resource must come out exactly as the
// suite's patched resource, compared as `kyverno test` does (spec §9.2).
func TestConformancePatchStrategicMerge(t *testing.T) {
	conformanceDir := corpus.Require(t)
	lists, err := os.ReadFile(filepath.Join(conformanceDir, "suites", "mutate.txt"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, suite := range strings.Fields(string(lists)) {
		dir := filepath.Join(conformanceDir, suite)
		var test struct {
			Policies  []string `json:"policies"`
			Resources []string `json:"resources"`
			Results   []struct {
				Policy           string   `json:"policy"`
				Rule             string   `json:"rule"`
				Kind             string   `json:"kind"`
				Resources        []string `json:"resources"`
				PatchedResources string   `json:"patchedResources"`
			} `json:"results"`
		}
		readYAML(t, filepath.Join(dir, "kyverno-test.yaml"), &test)
		var rules []simpleRule
		usable := true
		for _, p := range test.Policies {
			r, ok := simpleRules(t, filepath.Join(dir, p))
			usable = usable && ok
			rules = append(rules, r...)
		}
		if !usable || len(test.Policies) != 1 {
			continue
		}
		resources := map[string]map[string]any{}
		for _, f := range test.Resources {
			for _, doc := range readDocs(t, filepath.Join(dir, f)) {
				resources[docKey(doc)] = doc
			}
		}
		for _, res := range test.Results {
			if res.PatchedResources == "" {
				continue
			}
			patched := map[string]map[string]any{}
			for _, doc := range readDocs(t, filepath.Join(dir, res.PatchedResources)) {
				patched[docKey(doc)] = doc
			}
			for _, name := range res.Resources {
				key := res.Kind + "/" + name
				in, ok := resources[key]
				want, ok2 := patched[key]
				if !ok || !ok2 {
					continue
				}
				t.Run(suite+"/"+key, func(t *testing.T) {
					got := in
					for _, r := range rules {
						if !r.kinds[res.Kind] {
							continue
						}
						out, err := StrategicMerge(got, r.patch)
						if err != nil {
							if _, skipped := err.(*ConditionError); skipped {
								continue
							}
							t.Fatalf("rule %s: %v", r.name, err)
						}
						got = out
					}
					if !Equal(tidy(withoutDefaultNamespace(got)), tidy(withoutDefaultNamespace(want))) {
						t.Errorf("got %s\nwant %s", toYAML(got), toYAML(want))
					}
				})
				checked++
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d resources checked; the corpus selection is broken", checked)
	}
	t.Logf("%d resources checked", checked)
}

type simpleRule struct {
	name  string
	kinds map[string]bool
	patch map[string]any
}

// simpleRules returns the policy's rules when every one is a plain pSM rule.
func simpleRules(t *testing.T, file string) ([]simpleRule, bool) {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("{{")) {
		return nil, false
	}
	var pol struct {
		Spec struct {
			Rules []map[string]any `json:"rules"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &pol); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []simpleRule
	for _, r := range pol.Spec.Rules {
		mutate, _ := r["mutate"].(map[string]any)
		patch, _ := mutate["patchStrategicMerge"].(map[string]any)
		if patch == nil || len(mutate) != 1 || r["preconditions"] != nil || r["exclude"] != nil || r["context"] != nil {
			return nil, false
		}
		kinds := map[string]bool{}
		match, _ := r["match"].(map[string]any)
		filters, _ := match["any"].([]any)
		if len(match) != 1 || filters == nil {
			return nil, false
		}
		for _, f := range filters {
			fm, _ := f.(map[string]any)
			rd, _ := fm["resources"].(map[string]any)
			if len(fm) != 1 || len(rd) != 1 {
				return nil, false
			}
			ks, _ := rd["kinds"].([]any)
			for _, k := range ks {
				kinds[k.(string)] = true
			}
		}
		out = append(out, simpleRule{name: r["name"].(string), kinds: kinds, patch: patch})
	}
	return out, len(out) > 0
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func readDocs(t *testing.T, file string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	for _, part := range bytes.Split(raw, []byte("\n---")) {
		var m map[string]any
		if err := yaml.Unmarshal(part, &m); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(m) > 0 {
			docs = append(docs, m)
		}
	}
	return docs
}

// withoutDefaultNamespace drops `metadata.namespace: default`: the CLI puts inputs
// without a namespace there, and suites write their expectations either way.
func withoutDefaultNamespace(doc map[string]any) map[string]any {
	md, _ := doc["metadata"].(map[string]any)
	if md == nil || md["namespace"] != "default" {
		return doc
	}
	out := map[string]any{}
	for k, v := range doc {
		out[k] = v
	}
	m := map[string]any{}
	for k, v := range md {
		if k != "namespace" {
			m[k] = v
		}
	}
	out["metadata"] = m
	return out
}

func docKey(doc map[string]any) string {
	md, _ := doc["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	kind, _ := doc["kind"].(string)
	return kind + "/" + name
}

// tidy drops nulls and empty maps and lists, as `kyverno test` does before comparing.
func tidy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range t {
			if y := tidy(x); y != nil {
				out[k] = y
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		out := []any{}
		for _, x := range t {
			if y := tidy(x); y != nil {
				out = append(out, y)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return v
}
