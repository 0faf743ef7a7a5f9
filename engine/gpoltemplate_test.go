package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/engine/gpol"
	"github.com/charter-dev/charter/engine/review"
)

// templateCase is one case of testdata/gpol/templates.yaml.
type templateCase struct {
	Name         string           `json:"name"`
	Policy       map[string]any   `json:"policy"`
	Trigger      map[string]any   `json:"trigger"`
	Want         []map[string]any `json:"want"`
	Error        string           `json:"error"`
	CompileError string           `json:"compileError"`
}

// casePolicy builds a case's policy: a GeneratingPolicy for Namespace
// CREATEs unless the case says otherwise.
func casePolicy(t *testing.T, i int, tc *templateCase) kyvernov1.PolicyInterface {
	t.Helper()
	doc := tc.Policy
	doc["apiVersion"] = "policies.kyverno.io/v1"
	meta, _ := doc["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		doc["metadata"] = meta
	}
	meta["name"] = fmt.Sprintf("case-%d", i)
	spec := doc["spec"].(map[string]any)
	if spec["matchConstraints"] == nil {
		spec["matchConstraints"] = map[string]any{"resourceRules": []any{map[string]any{
			"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"namespaces"},
		}}}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var p kyvernov1.PolicyInterface
	switch doc["kind"] {
	case policiesv1.GeneratingPolicyKind:
		p = &policiesv1.GeneratingPolicy{}
	case policiesv1.NamespacedGeneratingPolicyKind:
		p = &policiesv1.NamespacedGeneratingPolicy{}
	default:
		t.Fatalf("kind %v", doc["kind"])
	}
	if err := json.Unmarshal(data, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGeneratingPolicyTemplates renders GeneratingPolicy templates
// (interpolate none and cel) for a trigger and checks what they generate,
// how they fail at evaluation, and what is refused at compile time.
func TestGeneratingPolicyTemplates(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "gpol", "templates.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []templateCase `json:"cases"`
	}
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		t.Fatal(err)
	}
	cases := file.Cases
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
	for i := range cases {
		tc := &cases[i]
		t.Run(tc.Name, func(t *testing.T) {
			p := casePolicy(t, i, tc)
			set, err := Compile([]kyvernov1.PolicyInterface{p})
			if tc.CompileError != "" {
				var faults fault.List
				if !errors.As(err, &faults) || !strings.Contains(faults.Error(), tc.CompileError) {
					t.Fatalf("compile error %v, want one containing %q", err, tc.CompileError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			meta := tc.Trigger["metadata"].(map[string]any)
			meta["uid"] = "uid-trigger"
			resp := set.Generate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: tc.Trigger})
			if len(resp.Policies) != 1 || len(resp.Policies[0].Rules) != 1 {
				t.Fatalf("responses %+v", resp.Policies)
			}
			rr := resp.Policies[0].Rules[0]
			if tc.Error != "" {
				if rr.Status != review.StatusError || !strings.Contains(rr.Message, tc.Error) {
					t.Fatalf("%s: %s, want error containing %q", rr.Status, rr.Message, tc.Error)
				}
				return
			}
			if rr.Status != review.StatusPass {
				t.Fatalf("%s: %s", rr.Status, rr.Message)
			}
			var got []map[string]any
			for _, g := range rr.Generated {
				obj := normalizeJSON(t, g.Object)
				om := obj["metadata"].(map[string]any)
				labels := om["labels"].(map[string]any)
				for k := range labels {
					if strings.HasPrefix(k, generate.LabelPrefix) || k == generate.LabelManagedBy {
						delete(labels, k)
					}
				}
				if len(labels) == 0 {
					delete(om, "labels")
				}
				got = append(got, obj)
			}
			want := make([]map[string]any, len(tc.Want))
			for j := range tc.Want {
				want[j] = normalizeJSON(t, tc.Want[j])
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Errorf("generated\n got %s\nwant %s", g, w)
			}
		})
	}
}

// TestGeneratingPolicyTemplateKinds: the kinds a template writes literally
// are the policy's generated kinds, which the controllers watch.
func TestGeneratingPolicyTemplateKinds(t *testing.T) {
	p := &policiesv1.GeneratingPolicy{Spec: policiesv1.GeneratingPolicySpec{Generation: []policiesv1.Generation{
		{Expression: `generator.Apply("a", [{"apiVersion": dyn("v1"), "kind": dyn("Secret")}])`},
		{Template: &policiesv1.GenerationTemplate{Interpolate: "cel", Value: "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n---\napiVersion: v1\nkind: (( variables.k ))\n---\napiVersion: v1\nkind: Secret"}},
	}}}
	if got := gpol.GeneratedKinds(p); !reflect.DeepEqual(got, []string{"v1/Secret", "networking.k8s.io/v1/NetworkPolicy"}) {
		t.Errorf("GeneratedKinds = %q", got)
	}
}

func normalizeJSON(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
