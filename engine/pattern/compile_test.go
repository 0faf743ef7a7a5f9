package pattern

import (
	"errors"
	"testing"

	"sigs.k8s.io/yaml"
)

func mustYAML(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad YAML %q: %v", s, err)
	}
	return v
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		name, pattern string
		field, msg    string
	}{
		{"unknown anchor", `{spec: {containers: [{"~(x)": 1}]}}`, "spec.containers[0]", `unknown anchor "~(x)"`},
		{"lower-case negation", `{spec: {"x(hostPath)": "null"}}`, "spec", `unknown anchor "x(hostPath)"`},
		{"empty anchor", `{"()": 1}`, "", `empty anchor "()"`},
		{"add anchor", `{spec: {"+(x)": 1}}`, "spec", `add anchor "+(x)" is only allowed in mutate patterns`},
		{"empty array", `{spec: {containers: []}}`, "spec.containers", "empty array: a pattern array needs at least one element"},
		{"existence needs a list", `{spec: {"^(containers)": {image: x}}}`, "spec.containers", `existence anchor "^(containers)" needs a list of maps, got a map`},
		{"existence needs maps", `{spec: {"^(args)": ["a"]}}`, "spec.args", `existence anchor "^(args)" needs a list of maps, got an element of type a string`},
		{"operator without operand", `{spec: {replicas: ">="}}`, "spec.replicas", `operator ">=" in ">=" has no operand`},
		{"operator without operand in alternative", `{spec: {x: "1 | <= "}}`, "spec.x", `operator "<=" in "1 | <= " has no operand`},
		{"quoted key in path", `{metadata: {labels: {"app.kubernetes.io/name": ">="}}}`, `metadata.labels["app.kubernetes.io/name"]`, `operator ">=" in ">=" has no operand`},
		{"positional element path", `{x: [[1], [">"]], w: [[], [1]]}`, "w[0]", "empty array: a pattern array needs at least one element"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(mustYAML(t, tc.pattern))
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Compile = %v, want a *CompileError", err)
			}
			if ce.Field != tc.field || ce.Msg != tc.msg {
				t.Errorf("got field %q msg %q\nwant field %q msg %q", ce.Field, ce.Msg, tc.field, tc.msg)
			}
			if Check(mustYAML(t, tc.pattern)) == nil {
				t.Error("Check accepted what Compile rejected")
			}
		})
	}
}

func TestCompileAccepts(t *testing.T) {
	for _, p := range []string{
		`{spec: {containers: [{"(image)": "*:latest", imagePullPolicy: "!IfNotPresent"}]}}`,
		`{spec: {"=(hostNetwork)": false, "X(hostPID)": "null", "^(volumes)": [{hostPath: {path: "/"}}, {emptyDir: {}}]}}`,
		`{spec: {containers: [{"<(image)": "corp/*"}], imagePullSecrets: [{name: "?*"}]}}`,
		`{spec: {x: ">"}}`,
		`{spec: {x: "<{{ request.object.spec.max }}"}}`,
		`{spec: {x: ">= 3 & <= 5 | 0"}}`,
		`{spec: {x: null, b: true, z: 1.5, w: "1-10"}}`,
		`{spec: {"f(x)y": 1}}`,
		`"*"`,
	} {
		if _, err := Compile(mustYAML(t, p)); err != nil {
			t.Errorf("Compile(%s): %v", p, err)
		}
	}
}

func TestHasVariables(t *testing.T) {
	for p, want := range map[string]bool{
		`{spec: {x: "{{ request.object.metadata.name }}"}}`: true,
		`{spec: {"{{ key }}": 1}}`:                          true,
		`{spec: {x: "$(./../name)"}}`:                       true,
		`{spec: {x: "a"}}`:                                  false,
	} {
		c, err := Compile(mustYAML(t, p))
		if err != nil {
			t.Fatal(err)
		}
		if c.HasVariables() != want {
			t.Errorf("HasVariables(%s) = %v", p, c.HasVariables())
		}
	}
}

// TestPhaseOrder checks Kyverno's key order, which decides which failure is
// reported: anchors first (sorted), then keys with nested anchors (reverse
// sorted), then the rest (sorted).
func TestPhaseOrder(t *testing.T) {
	c, _ := compile(mustYAML(t, `{b: 1, a: 1, "X(z)": 1, "(y)": 1, "=(w)": 1, "<(g)": 1, n1: {"(k)": 1}, n2: [{"=(k)": 1}]}`))
	var anchored, plain []string
	for _, f := range c.root.anchored {
		anchored = append(anchored, f.raw)
	}
	for _, f := range c.root.plain {
		plain = append(plain, f.raw)
	}
	wantAnchored := []string{"(y)", "=(w)", "X(z)"}
	wantPlain := []string{"n2", "n1", "<(g)", "a", "b"}
	if !equalStrings(anchored, wantAnchored) || !equalStrings(plain, wantPlain) {
		t.Errorf("anchored %v plain %v\nwant     %v plain %v", anchored, plain, wantAnchored, wantPlain)
	}
	// The first failing plain key in that order is the one reported.
	e := Validate(map[string]any{"a": 2.0, "b": 2.0, "n1": map[string]any{}, "n2": []any{}}, map[string]any{"a": 1.0, "b": 1.0})
	if e == nil || e.Path != "/a/" {
		t.Errorf("got %+v, want the failure at /a/", e)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
