package strict

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

type rule struct {
	Name  string            `json:"name"`
	Match map[string]string `json:"match,omitempty"`
}

type object struct {
	Kind string `json:"kind"`
	Spec struct {
		Rules []rule `json:"rules"`
	} `json:"spec"`
}

func TestUnmarshal(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		wantErr []string
	}{
		{"valid YAML", "kind: A\nspec:\n  rules:\n  - name: r\n    match: {x: z}\n", nil},
		{"valid JSON", `{"kind":"A","spec":{"rules":[{"name":"r"}]}}`, nil},
		{"unknown nested field", "kind: A\nspec:\n  rules:\n  - name: r\n  - nmae: s\n", []string{`unknown field "spec.rules[1].nmae"`}},
		{"two problems at once", "kind: A\nknd: B\nspec:\n  rulez: []\n", []string{`unknown field "knd"`, `unknown field "spec.rulez"`}},
		{"case matters", "Kind: A\n", []string{`unknown field "Kind"`}},
		{"duplicate field", "kind: A\nkind: B\n", []string{`"kind"`}},
		{"wrong type", "kind: A\nspec:\n  rules: {}\n", []string{"cannot unmarshal object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj object
			err := Unmarshal([]byte(tt.doc), &obj)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Unmarshal() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Unmarshal() = nil, want errors %q", tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Unmarshal() = %v, want it to contain %q", err, want)
				}
			}
		})
	}
}

// TestUnmarshalJSONAsUnmarshal: JSON that encoding/json wrote decodes to
// the same object and the same errors with and without the YAML pass.
func TestUnmarshalJSONAsUnmarshal(t *testing.T) {
	for _, doc := range []string{
		`{"kind":"A","spec":{"rules":[{"name":"r","match":{"x":"\u003cz\u003e\n"}}]}}`,
		`{"kind":"A","knd":"B","spec":{"rulez":[]}}`,
		`{"kind":"A","spec":{"rules":{}}}`,
	} {
		var viaYAML, direct object
		errYAML := Unmarshal([]byte(doc), &viaYAML)
		errJSON := UnmarshalJSON([]byte(doc), &direct)
		if fmt.Sprint(errYAML) != fmt.Sprint(errJSON) || !reflect.DeepEqual(viaYAML, direct) {
			t.Errorf("%s:\nUnmarshal     = %+v, %v\nUnmarshalJSON = %+v, %v", doc, viaYAML, errYAML, direct, errJSON)
		}
	}
	// encoding/json writes no key twice; a duplicate is still refused.
	var obj object
	if err := UnmarshalJSON([]byte(`{"kind":"A","kind":"B"}`), &obj); err == nil || !strings.Contains(err.Error(), `duplicate field "kind"`) {
		t.Errorf("UnmarshalJSON of a duplicate field = %v", err)
	}
}
