package strict

import (
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
