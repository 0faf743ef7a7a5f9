package variables

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/charter-dev/charter/engine/jmespath"
)

// testResolver searches a JSON document with the real interpreter, as the
// engine's context does.
func testResolver(t testing.TB, doc string) Resolver {
	t.Helper()
	var data any
	if err := json.Unmarshal([]byte(doc), &data); err != nil {
		t.Fatal(err)
	}
	i := jmespath.New()
	return ResolverFunc(func(expr string) (any, error) { return i.Search(expr, data) })
}

const ctxDoc = `{
  "request": {
    "operation": "CREATE",
    "object": {"metadata": {"name": "web", "labels": {"app": "nginx", "tier": "fe"}},
               "spec": {"replicas": 3, "containers": [{"name": "c", "image": "nginx:1.25"}]}},
    "oldObject": {"metadata": {"name": "old-web"}}
  },
  "key": "app",
  "names": ["a", "b"],
  "html": "<b>",
  "self": "x{{self}}{{self}}",
  "loop": "{{loop}}",
  "nested": "{{ key }}",
  "element": {"name": "e0"},
  "elementIndex": 2
}`

func TestSubstituteStrings(t *testing.T) {
	r := testResolver(t, ctxDoc)
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"whole string keeps type: object", "{{request.object.metadata.labels}}", map[string]any{"app": "nginx", "tier": "fe"}},
		{"whole string keeps type: number", "{{ request.object.spec.replicas }}", 3.0},
		{"whole string keeps type: array", "{{names}}", []any{"a", "b"}},
		{"whitespace inside braces", "{{   request.object.metadata.name\t}}", "web"},
		{"embedded string", "name={{request.object.metadata.name}}", "name=web"},
		{"embedded number", "n={{request.object.spec.replicas}}", "n=3"},
		{"embedded object is compact JSON", "l={{request.object.metadata.labels}}", `l={"app":"nginx","tier":"fe"}`},
		{"embedded array", "{{names}}!", `["a","b"]!`},
		{"embedded null", "x={{ request.object.metadata.missing || null }}", "x=null"},
		{"whole-string null", "{{ request.object.metadata.missing || null }}", nil},
		{"two variables", "{{request.object.metadata.name}}-{{key}}", "web-app"},
		{"adjacent variables", "{{key}}{{key}}", "appapp"},
		{"nested: inner first", "{{ request.object.metadata.labels.{{key}} }}", "nginx"},
		{"nested inside a function argument", "{{ to_upper('{{key}}') }}", "APP"},
		{"multi-select hash braces", "{{ {n: request.object.metadata.name} }}", map[string]any{"n": "web"}},
		{"escaped variable keeps text without backslash", `\{{request.object.metadata.name}}`, "{{request.object.metadata.name}}"},
		{"escaped next to real", `a \{{x}} {{key}}`, "a {{x}} app"},
		{"substituted text is scanned again", "v={{nested}}", "v=app"},
		{"shallow variable is not scanned again", "v={{- nested}}", "v={{ key }}"},
		{"whole-string result is not scanned again", "{{nested}}", "{{ key }}"},
		{"element is just an expression", "{{element.name}}#{{elementIndex}}", "e0#2"},
		{"HTML escaping like encoding/json", "{{ [html] }}.", `["\u003cb\u003e"].`},
		{"no variables", "plain", "plain"},
		{"single braces are text", "{a} {b}}", "{a} {b}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Substitute(tc.in, r)
			if err != nil {
				t.Fatalf("Substitute(%q): %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Substitute(%q) = %#v, want %#v", tc.in, got, tc.want)
			}
		})
	}
}

func TestSubstituteErrors(t *testing.T) {
	r := testResolver(t, ctxDoc)
	for _, tc := range []struct {
		name, in  string
		opts      []Option
		wantMsg   string
		wantFound bool
	}{
		{"missing key names variable and path", "{{request.object.metadata.labels.foo}}", []Option{WithPath("/mutate/patchStrategicMerge/metadata/labels/x")},
			`failed to resolve request.object.metadata.labels.foo at path /mutate/patchStrategicMerge/metadata/labels/x: Unknown key "foo" in path`, true},
		{"syntax error", "{{ request.[ }}", nil, "failed to resolve request.[ at path /: invalid JMESPath expression", false},
		{"self-doubling value stops", "{{self}}{{self}} ", nil, "more than 1000 variables in one string", false},
		{"self-reproducing value does not loop", "{{loop}} ", nil, "still unresolved after 64 rounds", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Substitute(tc.in, r, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("error = %v, want containing %q", err, tc.wantMsg)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error is %T, want *Error", err)
			}
			if got := jmespath.IsNotFound(err); got != tc.wantFound {
				t.Errorf("IsNotFound = %v, want %v", got, tc.wantFound)
			}
		})
	}
}

func TestSubstituteMissingOption(t *testing.T) {
	r := testResolver(t, ctxDoc)
	got, err := Substitute(map[string]any{"key": "{{request.object.metadata.labels.foo}}", "s": "x{{request.object.nope}}"}, r, WithMissing(""))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"key": "", "s": "x"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
	// Only missing keys are forgiven.
	if _, err := Substitute("{{ to_upper(`1`) }}", r, WithMissing(nil)); err == nil {
		t.Error("function error was forgiven by WithMissing")
	}
}

func TestSubstituteForDelete(t *testing.T) {
	r := testResolver(t, ctxDoc)
	got, err := Substitute("{{request.object.metadata.name}}", r, ForDelete(true))
	if err != nil || got != "old-web" {
		t.Errorf("got %v, %v; want old-web", got, err)
	}
}

func TestSubstituteDocument(t *testing.T) {
	r := testResolver(t, ctxDoc)
	in := map[string]any{
		"metadata": map[string]any{
			"labels": map[string]any{"{{key}}": "{{request.object.metadata.name}}", "fixed": "v"},
		},
		"spec": map[string]any{
			"replicas": "{{request.object.spec.replicas}}",
			"list":     []any{"a", "{{key}}", 1.0, true, nil},
			"static":   map[string]any{"x": "y"},
		},
	}
	before := deepCopy(t, in)
	got, err := Substitute(in, r)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": "web", "fixed": "v"}},
		"spec": map[string]any{
			"replicas": 3.0,
			"list":     []any{"a", "app", 1.0, true, nil},
			"static":   map[string]any{"x": "y"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v\nwant %#v", got, want)
	}
	if !reflect.DeepEqual(in, before) {
		t.Error("Substitute modified its input")
	}
	// Unchanged sub-trees are shared, not copied.
	if reflect.ValueOf(got.(map[string]any)["spec"].(map[string]any)["static"]).Pointer() != reflect.ValueOf(in["spec"].(map[string]any)["static"]).Pointer() {
		t.Error("unchanged sub-tree was copied")
	}
}

func TestSubstituteNoVariablesReturnsInput(t *testing.T) {
	in := map[string]any{"a": []any{"x", map[string]any{"b": 1.0}}, "c": "{single}"}
	allocs := testing.AllocsPerRun(100, func() {
		out, err := Substitute(in, nil)
		if err != nil {
			t.Fatal(err)
		}
		if reflect.ValueOf(out).Pointer() != reflect.ValueOf(in).Pointer() {
			t.Fatal("input not returned")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations on the no-variable path, want 0", allocs)
	}
}

func TestSubstituteAt(t *testing.T) {
	r := testResolver(t, ctxDoc)
	pattern := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"(image)": "{{@}}", "name": "{{ to_upper('{{@}}') }}"}}}}
	got, err := Substitute(pattern, r, WithPath("/validate/pattern"))
	if err != nil {
		t.Fatal(err)
	}
	c := got.(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	if c["(image)"] != "nginx:1.25" || c["name"] != "C" {
		t.Errorf("got %#v", c)
	}
	// In foreach, everything through the last foreach and two more segments is dropped.
	got, err = Substitute(map[string]any{"metadata": map[string]any{"name": "{{@}}"}}, r, WithPath("/mutate/foreach/0/patchStrategicMerge"))
	if err != nil || got.(map[string]any)["metadata"].(map[string]any)["name"] != "web" {
		t.Errorf("foreach @: got %v, %v", got, err)
	}
}

func TestSubstituteTargetAt(t *testing.T) {
	r := testResolver(t, `{"target": {"metadata": {"name": "tgt"}}, "request": {"object": {"metadata": {"name": "req"}}}}`)
	got, err := Substitute(map[string]any{"metadata": map[string]any{"name": "{{@}}"}}, r, WithPath("/mutate/patchStrategicMerge"))
	if err != nil || got.(map[string]any)["metadata"].(map[string]any)["name"] != "tgt" {
		t.Errorf("got %v, %v; want tgt", got, err)
	}
}

func TestFind(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"none", nil},
		{"{{ a }} and {{b.c}}", []string{"a", "b.c"}},
		{`\{{ escaped }} {{x}}`, []string{"x"}},
		{"{{ f('{{inner}}') }}", []string{"inner"}},
		{"{{- shallow }}", []string{"shallow"}},
	} {
		if got := Find(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Find(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestHasVariables(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want bool
	}{
		{"x", false},
		{`\{{x}}`, false},
		{map[string]any{"a": []any{1.0, "{{x}}"}}, true},
		{map[string]any{"{{k}}": 1.0}, true},
		{map[string]any{"m": "$(./../x)"}, true},
		{[]any{"a", nil, true}, false},
	} {
		if got := HasVariables(tc.in); got != tc.want {
			t.Errorf("HasVariables(%#v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func deepCopy(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
