package generate

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

type checkCase struct {
	Name            string                `json:"name"`
	PolicyNamespace string                `json:"policyNamespace,omitempty"`
	Generate        *kyvernov1.Generation `json:"generate"`
	Faults          []Fault               `json:"faults,omitempty"`
	Warnings        []string              `json:"warnings,omitempty"`
}

func TestCheck(t *testing.T) {
	var cases []checkCase
	readYAML(t, filepath.Join("testdata", "check.yaml"), &cases)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			rule := &kyvernov1.Rule{Name: "r", Generation: tc.Generate}
			err := Check(rule, CheckOptions{PolicyNamespace: tc.PolicyNamespace})
			var got Faults
			if err != nil && !errors.As(err, &got) {
				t.Fatalf("Check returned %T, want Faults: %v", err, err)
			}
			if len(got) != len(tc.Faults) {
				t.Fatalf("got %d faults, want %d:\n got: %v\nwant: %v", len(got), len(tc.Faults), got, tc.Faults)
			}
			for i := range got {
				if got[i].Field != tc.Faults[i].Field || !strings.Contains(got[i].Message, tc.Faults[i].Message) {
					t.Errorf("fault %d = %q, want field %q with %q", i, got[i], tc.Faults[i].Field, tc.Faults[i].Message)
				}
			}
			var warned []string
			for _, w := range Warnings(rule) {
				warned = append(warned, w.Field)
			}
			if strings.Join(warned, ",") != strings.Join(tc.Warnings, ",") {
				t.Errorf("warnings on %v, want %v", warned, tc.Warnings)
			}
		})
	}
}

func TestCheckCustomScope(t *testing.T) {
	rule := &kyvernov1.Rule{Name: "r", Generation: &kyvernov1.Generation{GeneratePattern: kyvernov1.GeneratePattern{
		ResourceSpec: kyvernov1.ResourceSpec{APIVersion: "example.com/v1", Kind: "Widget", Name: "w"},
		RawData:      mustJSON(t, map[string]any{}),
	}}}
	if err := Check(rule, CheckOptions{}); err != nil {
		t.Fatalf("unknown kind: %v", err)
	}
	namespaced := func(string, string) (bool, bool) { return false, true }
	err := Check(rule, CheckOptions{Scope: namespaced})
	if err == nil || !strings.Contains(err.Error(), "generate.namespace: required: Widget is namespaced") {
		t.Fatalf("with discovery saying Widget is namespaced: got %v", err)
	}
}

func TestCheckWithoutGenerate(t *testing.T) {
	if err := Check(&kyvernov1.Rule{Name: "v"}, CheckOptions{}); err != nil {
		t.Fatal(err)
	}
}
