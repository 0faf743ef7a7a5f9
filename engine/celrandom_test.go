package engine

import (
	"regexp"
	"strings"
	"testing"
)

// TestRandomRegex: random(regex) gives strings the regex matches, in both
// spellings, and a bad regex is an error naming it.
func TestRandomRegex(t *testing.T) {
	patterns := []string{
		`[a-z]{8}`,
		`^[0-9a-f]{4}-[0-9a-f]{4}$`,
		`(foo|bar|baz)+`,
		`abc\d{3,5}x?`,
		`[^a-z0-9]{6}`,
		`(?i)charter`,
		`\w+@\w+\.(com|org)`,
		`.{10}`,
		`a*b+c?`,
		`[\p{Greek}]{3}`,
		`\bword\b`,
		`prefix-[A-Z]{2}[0-9]{0,}`,
		``,
	}
	for _, p := range patterns {
		re := regexp.MustCompile(p)
		for _, expr := range []string{`random("` + strings.ReplaceAll(p, `\`, `\\`) + `")`, `random.random("` + strings.ReplaceAll(p, `\`, `\\`) + `")`} {
			seen := map[string]bool{}
			for range 20 {
				v, err := evalPolicyExpr(t, expr)
				if err != nil {
					t.Fatalf("%s: %v", expr, err)
				}
				s := v.(string)
				if !re.MatchString(s) {
					t.Fatalf("%s = %q, which %q does not match", expr, s, p)
				}
				seen[s] = true
			}
			if p == `[a-z]{8}` && len(seen) < 2 {
				t.Errorf("%s gave the same string 20 times: %v", expr, seen)
			}
		}
	}
	for _, tt := range []struct{ pattern, want string }{
		{`[a-z`, `invalid regex "[a-z": error parsing regexp: missing closing ]`},
		{`a(b`, `invalid regex "a(b"`},
		{`x{2,1}`, `invalid regex "x{2,1}"`},
		{`$a^`, `no string matching regex "$a^"`},
	} {
		_, err := evalPolicyExpr(t, `random("`+tt.pattern+`")`)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("random(%q): error %v, want it to contain %q", tt.pattern, err, tt.want)
		}
	}
	v, err := evalPolicyExpr(t, `random()`)
	if err != nil || !regexp.MustCompile(`^[0-9a-z]{8}$`).MatchString(v.(string)) {
		t.Errorf("random() = %v, %v; want [0-9a-z]{8}", v, err)
	}
}
