package generate

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// BasicElements loads variable entries and evaluates preconditions as
// Kyverno does; the entry YAML is a foreach entry's context/preconditions.
func TestBasicElements(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entry   string
		element any
		want    bool
		wantErr string
	}{
		{name: "no context, no preconditions", entry: `{}`, element: "a", want: true},
		{name: "all holds", entry: `{preconditions: {all: [{key: "{{element}}", operator: Equals, value: a}]}}`, element: "a", want: true},
		{name: "all fails", entry: `{preconditions: {all: [{key: "{{element}}", operator: Equals, value: a}]}}`, element: "b", want: false},
		{name: "any: one holds", entry: `{preconditions: {any: [{key: "{{element}}", operator: Equals, value: x}, {key: "{{element}}", operator: In, value: [a, b]}]}}`, element: "b", want: true},
		{name: "any: none holds", entry: `{preconditions: {any: [{key: "{{element}}", operator: Equals, value: x}]}}`, element: "b", want: false},
		{name: "missing variable is an error naming it", entry: `{preconditions: {all: [{key: "{{element.nope}}", operator: Equals, value: ""}]}}`, element: map[string]any{}, wantErr: `failed to resolve element.nope`},
		{name: "variable entry with jmesPath over the document", entry: `{context: [{name: up, variable: {jmesPath: to_upper(element)}}], preconditions: {all: [{key: "{{up}}", operator: Equals, value: A}]}}`, element: "a", want: true},
		{name: "variable entry with value and jmesPath", entry: `{context: [{name: val, variable: {value: {x: "{{element}}"}, jmesPath: x}}], preconditions: {all: [{key: "{{val}}", operator: Equals, value: a}]}}`, element: "a", want: true},
		{name: "variable entry default", entry: `{context: [{name: val, variable: {jmesPath: element.missing, default: dflt}}], preconditions: {all: [{key: "{{val}}", operator: Equals, value: dflt}]}}`, element: map[string]any{}, want: true},
		{name: "variable entry failing without default", entry: `{context: [{name: val, variable: {jmesPath: element.missing}}]}`, element: map[string]any{}, wantErr: `context entry "val": failed to evaluate "element.missing"`},
		{name: "configMap entry needs the engine", entry: `{context: [{name: cm, configMap: {name: x, namespace: y}}]}`, element: "a", wantErr: `context entry "cm": only variable entries`},
		{name: "unknown operator", entry: `{preconditions: {all: [{key: a, operator: Sorta, value: a}]}}`, element: "a", wantErr: "Sorta"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var entry kyvernov1.ForEachGeneration
			if err := yaml.Unmarshal([]byte(tc.entry), &entry); err != nil {
				t.Fatal(err)
			}
			doc := triggerDocument(t, namespaceTrigger("ns"), nil).Child()
			doc.SetRoot("element", tc.element)
			ok, err := BasicElements{}.Enter(context.Background(), doc, 0, &entry)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.want {
				t.Fatalf("Enter = %v, %v; want %v", ok, err, tc.want)
			}
		})
	}
}

func TestPreconditionsNil(t *testing.T) {
	ok, err := Preconditions(nil, nil)
	if !ok || err != nil {
		t.Fatalf("nil block = %v, %v; want true", ok, err)
	}
}
