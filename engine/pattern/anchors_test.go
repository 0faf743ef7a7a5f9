package pattern

import "testing"

// TestAnchors exercises each anchor of validate-semantics.md §2 and how its
// outcome propagates through maps and arrays.
func TestAnchors(t *testing.T) {
	cases := []struct {
		name               string
		pattern, resource  string
		want, path, msgHas string
	}{
		// Condition.
		{"condition met, then-part passes", `{"(a)": 1, b: 2}`, `{a: 1, b: 2}`, "pass", "", ""},
		{"condition met, then-part fails", `{"(a)": 1, b: 2}`, `{a: 1, b: 3}`, "fail", "/b/", ""},
		{"condition unmet", `{"(a)": 1, b: 2}`, `{a: 9, b: 3}`, "skip", "", "conditional anchor mismatch: resource value '9' does not match '1' at path /a/"},
		{"condition key absent", `{"(a)": 1, b: 2}`, `{b: 3}`, "skip", "/a/", "conditional anchor key doesn't exist in the resource"},
		{"condition on a nested map", `{"(sc)": {"privileged": true}, x: 1}`, `{sc: {privileged: false}, x: 2}`, "skip", "", ""},
		{"condition wraps a negation", `{"(sc)": {"X(p)": "null"}, x: 1}`, `{sc: {p: 1}, x: 2}`, "skip", "", "conditional anchor mismatch: negation anchor matched"},
		{"skip propagates from a nested map", `{spec: {"(a)": 1, b: 2}, other: 1}`, `{spec: {a: 2, b: 3}, other: 2}`, "skip", "", ""},
		{"nested key order: anchored subtree first", `{a: 1, z: {"(c)": 1}}`, `{a: 2, z: {c: 2}}`, "skip", "", ""},

		// Global.
		{"global absent is a no-op", `{"<(a)": 1, b: 2}`, `{b: 3}`, "fail", "/b/", ""},
		{"global unmet skips the rule", `{"<(a)": 1, b: 2}`, `{a: 2, b: 3}`, "skip", "", "global anchor mismatch: resource value '2' does not match '1'"},
		{"global deep in an array skips the rule", `{c: [{"<(i)": "corp/*"}], s: "*"}`, `{c: [{i: docker/x}, {i: quay/y}]}`, "skip", "", ""},

		// Equality.
		{"equality absent passes", `{"=(a)": 1}`, `{}`, "pass", "", ""},
		{"equality matches", `{"=(a)": 1}`, `{a: 1}`, "pass", "", ""},
		{"equality mismatches", `{"=(a)": 1}`, `{a: 2}`, "fail", "/a/", ""},
		{"equality over a map with a condition that skips", `{"=(sc)": {"(p)": true, u: 0}}`, `{sc: {p: false, u: 5}}`, "skip", "", ""},
		{"equality over an array", `{"=(c)": [{image: "!*:latest"}]}`, `{c: [{image: "a:latest"}]}`, "fail", "/c/0/image/", ""},

		// Existence.
		{"existence needs every pattern map", `{"^(c)": [{n: a}, {n: b}]}`, `{c: [{n: a}, {n: b}, {n: c}]}`, "pass", "", ""},
		{"existence with one pattern map unmatched", `{"^(c)": [{n: a}, {n: z}]}`, `{c: [{n: a}, {n: b}]}`, "fail", "/c/", "existence anchor validation failed at path /c/"},
		{"existence on a non-list", `{"^(c)": [{n: a}]}`, `{c: {n: a}}`, "fail", "/c/", "invalid resource type map[string]interface {}: Existence ^ () anchor can be used only on list/array type resource"},
		{"existence with a map pattern", `{"^(c)": {n: a}}`, `{c: [{n: a}]}`, "fail", "/c/", "invalid pattern type map[string]interface {}: Pattern has to be of list"},

		// Negation.
		{"negation absent", `{"X(a)": "null"}`, `{b: 1}`, "pass", "", ""},
		{"negation present even if null", `{"X(a)": "null"}`, `{a: null}`, "fail", "/a/", "negation anchor matched in resource: /a/ is not allowed"},
		{"negation inside an array element", `{c: [{"X(p)": "null"}]}`, `{c: [{}, {p: 1}]}`, "fail", "/c/1/p/", ""},

		// Missing anchor keys turn plain failures into errors.
		{"condition key present somewhere, plain fails elsewhere", `{c: [{"(nm)": a, i: x}], h: false}`, `{c: [{i: y}, {nm: a, i: x}], h: true}`, "fail", "/h/", ""},
		{"condition key not visited: empty array", `{e: [{"(nm)": a}], h: false}`, `{e: [], h: true}`, "fail", "/h/", ""},
		{"existence key absent, plain fails", `{"^(e)": [{n: a}], h: false}`, `{h: true}`, "error", "", "resource value 'true' does not match 'false' at path /h/"},

		// Arrays.
		{"every element skipped skips the array", `{c: [{"(nm)": a, i: x}]}`, `{c: [{nm: b, i: y}, {nm: c, i: y}]}`, "skip", "", "; "},
		{"failing element after skipped one", `{c: [{"(nm)": "a*", i: x}]}`, `{c: [{nm: b, i: y}, {nm: a1, i: y}]}`, "fail", "/c/1/i/", ""},
		{"array against a map", `{c: [{i: x}]}`, `{c: {i: x}}`, "fail", "/c/", "resource does not satisfy the expected overlay pattern"},
		{"map against an array", `{c: {i: x}}`, `{c: [{i: x}]}`, "fail", "/c/", "Expected map[string]interface {}, found []interface {}"},
		{"non-map resource elements", `{c: [{i: x}]}`, `{c: ["s"]}`, "fail", "/c/0/", "found string"},
		{"positional nested arrays: first is a scalar list", `{m: [[1, 2], ["a"]]}`, `{m: [[1, 2], ["b"]]}`, "fail", "/m/0/", "resource value '[1 2]' does not match '1' at path /m/0/"},
		{"positional nested arrays: second element", `{m: [[1], ["a"]]}`, `{m: [[1, 1], ["b"]]}`, "fail", "/m/1/", ""},
		{"condition met, then a plain failure elsewhere", `{c: [{"(nm)": a}], h: false}`, `{c: [{nm: a}], "=(q)": 1, h: true}`, "fail", "/h/", ""},
		{"scalar pattern on an array of values", `{ports: ">1000"}`, `{ports: [8080, 80]}`, "fail", "/ports/", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resource, pattern := mustYAML(t, tc.resource), mustYAML(t, tc.pattern)
			got := Validate(resource, pattern)
			checkVerdict(t, resource, pattern, got)
			if kindOf(got) != tc.want {
				t.Fatalf("got %s %+v, want %s", kindOf(got), got, tc.want)
			}
			if got == nil {
				return
			}
			if tc.path != "" && got.Path != tc.path {
				t.Errorf("path %q, want %q", got.Path, tc.path)
			}
			if tc.msgHas != "" && !contains(got.Msg, tc.msgHas) {
				t.Errorf("msg %q lacks %q", got.Msg, tc.msgHas)
			}
		})
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// TestWildcardKeysUseFirstSortedMatch pins the deterministic choice charter
// makes where Kyverno picks a random matching label.
func TestWildcardKeysUseFirstSortedMatch(t *testing.T) {
	p := mustYAML(t, `{metadata: {labels: {"team-*": "a*"}}}`)
	r := mustYAML(t, `{metadata: {labels: {team-b: bad, team-a: abc}}}`)
	for i := 0; i < 20; i++ {
		if e := Validate(r, p); e != nil {
			t.Fatalf("run %d: %+v", i, e)
		}
	}
}

func TestCompiledIsReusable(t *testing.T) {
	c, err := Compile(mustYAML(t, `{metadata: {labels: {"app.kubernetes.io/*": "?*"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if e := c.Validate(mustYAML(t, `{metadata: {labels: {app.kubernetes.io/name: x}}}`)); e != nil {
		t.Fatalf("first resource: %+v", e)
	}
	// The expansion for the first resource must not stick to the pattern.
	if e := c.Validate(mustYAML(t, `{metadata: {labels: {app.kubernetes.io/part-of: y}}}`)); e != nil {
		t.Fatalf("second resource: %+v", e)
	}
	if e := c.Validate(mustYAML(t, `{metadata: {labels: {other: y}}}`)); e == nil || e.Kind != Fail {
		t.Fatalf("third resource: %+v", e)
	}
}

// TestFailurePathBeyondInlineDepth: the walker keeps its first 16 path
// segments inline and the rest aside; a failure deeper than that, and one
// back near the top after a deep subtree passed, report the right paths.
func TestFailurePathBeyondInlineDepth(t *testing.T) {
	var pattern, resource any = "x", "y"
	want := "/"
	for i := 19; i >= 0; i-- {
		key := string(rune('a' + i))
		if i%5 == 2 {
			pattern, resource = []any{pattern}, []any{resource}
			want = "/0" + want
		} else {
			pattern, resource = map[string]any{key: pattern}, map[string]any{key: resource}
			want = "/" + key + want
		}
	}
	got := Validate(resource, pattern)
	if got == nil || got.Kind != Fail || got.Path != want {
		t.Fatalf("20 levels deep: got %+v, want a failure at %s", got, want)
	}

	// The deep subtree passes, then a shallow key fails: the path must not
	// keep segments of the deep walk.
	deepPattern, deepResource := map[string]any{"deep": pattern}, map[string]any{"deep": pattern}
	deepPattern["z"], deepResource["z"] = 1, 2
	got = Validate(deepResource, deepPattern)
	if got == nil || got.Path != "/z/" {
		t.Fatalf("after a deep pass: got %+v, want a failure at /z/", got)
	}
}
