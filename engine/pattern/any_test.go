package pattern

import "testing"

func compileAll(t *testing.T, patterns ...string) []*Compiled {
	t.Helper()
	var cs []*Compiled
	for _, p := range patterns {
		c, err := Compile(mustYAML(t, p))
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	return cs
}

// TestValidateAny covers anyPattern (validate-semantics.md §5).
func TestValidateAny(t *testing.T) {
	patterns := compileAll(t,
		`{spec: {"(kind)": a, x: 1}}`, // skips unless kind is a
		`{spec: {x: 2}}`,
		`{spec: {x: 3}}`,
	)
	cases := []struct {
		name     string
		resource string
		verdict  Kind
		passed   int
		kinds    []Kind
	}{
		{"first passes", `{spec: {kind: a, x: 1}}`, Pass, 0, nil},
		{"second passes after a skip", `{spec: {kind: b, x: 2}}`, Pass, 1, []Kind{Skip}},
		{"third passes after a fail", `{spec: {kind: a, x: 3}}`, Pass, 2, []Kind{Fail, Fail}},
		{"none passes", `{spec: {kind: b, x: 9}}`, Fail, -1, []Kind{Skip, Fail, Fail}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ValidateAny(mustYAML(t, tc.resource), patterns)
			if r.Verdict() != tc.verdict || r.Passed != tc.passed || len(r.Errors) != len(tc.kinds) {
				t.Fatalf("got verdict %v passed %d errors %d, want %v %d %d", r.Verdict(), r.Passed, len(r.Errors), tc.verdict, tc.passed, len(tc.kinds))
			}
			for i, k := range tc.kinds {
				if r.Errors[i].Index != i || r.Errors[i].Kind != k {
					t.Errorf("error %d: index %d kind %v, want %v", i, r.Errors[i].Index, r.Errors[i].Kind, k)
				}
			}
		})
	}

	onlySkips := compileAll(t, `{spec: {"(kind)": a}}`, `{spec: {"<(kind)": b, x: 1}}`)
	if r := ValidateAny(mustYAML(t, `{spec: {kind: c}}`), onlySkips); r.Verdict() != Skip {
		t.Errorf("all skipped: verdict %v, want skip", r.Verdict())
	}
	if r := ValidateAny(mustYAML(t, `{}`), nil); r.Verdict() != Pass {
		t.Errorf("no patterns: verdict %v, want pass", r.Verdict())
	}
}
