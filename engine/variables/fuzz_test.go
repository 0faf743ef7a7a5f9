package variables

import (
	"encoding/json"
	"testing"

	"github.com/charter-dev/charter/engine/jmespath"
)

// FuzzSubstitute checks that no string, however malformed, makes
// substitution panic or hang, whether it is a value or a map key, and that a
// string without "{{" and "$(" comes back unchanged.
func FuzzSubstitute(f *testing.F) {
	for _, seed := range []string{
		"", "plain", "{{", "}}", "{{}}", "{{ }}", "{{a}}", "x{{a}}y", "{{a}}{{b}}",
		"{{ {{a}} }}", "{{ {{ {{a}} }} }}", `\{{a}}`, `\\{{a}}`, "{{- a}}", "{{-}}",
		"{{ {x: a} }}", "{{ a.{{b}} }}", "{{@}}", "$(./a)", "$(<=./../b)", `\$(x)`, "$()",
		"{{ self }}", "{{ to_upper('{{a}}') }}", "\uE000 {{- a}} \uE0010\uE001", "{{ `1` }}",
		"{{ request.object.metadata.labels.\"app.kubernetes.io/name\" || '' }}",
	} {
		f.Add(seed)
	}
	var data any
	if err := json.Unmarshal([]byte(`{"a": "A", "b": "a", "self": "{{self}}{{self}}", "n": 1, "o": {"k": [1, "{{a}}"]}}`), &data); err != nil {
		f.Fatal(err)
	}
	i := jmespath.New()
	r := ResolverFunc(func(expr string) (any, error) { return i.Search(expr, data) })
	f.Fuzz(func(t *testing.T, s string) {
		doc := map[string]any{"v": s, s: []any{s, 1.0, nil}, "n": map[string]any{"x": s}}
		_, _ = Substitute(doc, r, WithPath("/validate/pattern"))
		_, _ = Substitute(s, r, WithMissing(nil), ForDelete(true))
		_, _ = SubstituteReferences(doc)
		_ = Find(s)
		_ = HasVariables(doc)
		_ = CheckBackground(doc, "/")
		if !mayNeedWork(s) {
			out, err := Substitute(s, r)
			if err != nil || out != s {
				t.Fatalf("Substitute(%q) = %v, %v; want the input back", s, out, err)
			}
		}
	})
}
