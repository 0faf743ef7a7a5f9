package pattern

import (
	"encoding/json"
	"testing"
)

// FuzzValidate feeds arbitrary JSON patterns and resources to the matcher:
// it must never panic, and Compile must either fail or give a pattern that
// matches exactly like the lenient Validate.
func FuzzValidate(f *testing.F) {
	seeds := [][2]string{
		{`{"spec":{"containers":[{"(image)":"*:latest","imagePullPolicy":"!IfNotPresent"}]}}`, `{"spec":{"containers":[{"image":"a:latest","imagePullPolicy":"IfNotPresent"}]}}`},
		{`{"spec":{"^(c)":[{"n":"a"}],"X(h)":"null","=(x)":">1 & <5 | 9"}}`, `{"spec":{"c":[{"n":"a"}],"x":3}}`},
		{`{"metadata":{"labels":{"app.kubernetes.io/*":"?*","=(team-?)":"a*"}}}`, `{"metadata":{"labels":{"app.kubernetes.io/name":"x"}}}`},
		{`{"a":[[1],["x"]],"b":[],"c":"1-10","d":"1!-10","<(e)":{"f":null}}`, `{"a":[[1,1],["x"]],"c":5,"d":"5Gi","e":{"f":0}}`},
		{`{"x":"<=1Gi","y":">1h","z":"~(q)"}`, `[1,"a",null,{"x":[]}]`},
		{`{"+(x)":1,"()":2,"~(y)":3}`, `{"x":1}`},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, patternJSON, resourceJSON string) {
		var p, r any
		if json.Unmarshal([]byte(patternJSON), &p) != nil || json.Unmarshal([]byte(resourceJSON), &r) != nil {
			return
		}
		lenient := Validate(r, p)
		c, err := Compile(p)
		if err != nil {
			return
		}
		strict := c.Validate(r)
		if (lenient == nil) != (strict == nil) || (lenient != nil && *lenient != *strict) {
			t.Fatalf("Validate = %+v, Compiled.Validate = %+v", lenient, strict)
		}
		if strict != nil && strict.Kind == Fail && strict.Path == "" {
			t.Fatalf("a Fail without a path: %+v", strict)
		}
	})
}

// FuzzStringPattern checks that any string pattern parses and matches any
// scalar without panicking.
func FuzzStringPattern(f *testing.F) {
	for _, s := range []string{">5 & <10 | 100", "1-10", "-10-+8", "1!-10", "128Mi-512Mi", ">= 1Gi",
		"!*:latest", "?*", "<1h", "a|b&c", "", "!", ">", "1.5-2.5x", "0-0", "|&|"} {
		f.Add(s, "5")
	}
	f.Fuzz(func(t *testing.T, pattern, value string) {
		for _, v := range []any{value, 5.0, int64(-3), true, nil, []any{value}, map[string]any{}} {
			_ = MatchValue(v, pattern)
		}
		// A string that equals the pattern always matches it.
		if !MatchValue(pattern, pattern) {
			t.Fatalf("pattern %q does not match itself", pattern)
		}
	})
}
