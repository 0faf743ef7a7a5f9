package pattern

import "testing"

// TestMatchValue covers the scalar comparison of validate-semantics.md §3:
// typed patterns, the string grammar, and the null and "" rules of §3.4.
func TestMatchValue(t *testing.T) {
	cases := []struct {
		name    string
		value   any
		pattern any
		want    bool
	}{
		// §3.1 non-string patterns.
		{"bool equal", true, true, true},
		{"bool differs", false, true, false},
		{"bool vs string", "true", true, false},
		{"float pattern vs equal float", 2.5, 2.5, true},
		{"whole float pattern vs int", 3, 3.0, true},
		{"fractional float pattern vs int", 3, 3.5, false},
		{"float pattern vs numeric string", "2.5", 2.5, true},
		{"float pattern vs junk string", "x", 2.5, false},
		{"int pattern vs whole float", 4.0, int64(4), true},
		{"int pattern vs fractional float", 4.5, int64(4), false},
		{"int pattern vs int string", "4", 4, true},
		{"int pattern vs float string", "4.0", 4, false},
		{"int pattern vs bool", true, 1, false},
		{"null vs nil", nil, nil, true},
		{"null vs zero", 0.0, nil, true},
		{"null vs int zero", int64(0), nil, true},
		{"null vs empty string", "", nil, true},
		{"null vs false", false, nil, true},
		{"null vs one", 1.0, nil, false},
		{"null vs empty map", map[string]any{}, nil, false},
		{"null vs empty list", []any{}, nil, false},
		{"map pattern vs map", map[string]any{"a": 1.0}, map[string]any{"b": 2.0}, true},
		{"map pattern vs string", "a", map[string]any{}, false},
		{"array pattern never matches", []any{"a"}, []any{"a"}, false},
		{"unknown pattern type", "a", struct{}{}, false},

		// §3.2 string grammar.
		{"identical string", "a|b", "a|b", true},
		{"alternation first", "a", "a|b", true},
		{"alternation second", "b", "a | b", true},
		{"alternation none", "c", "a|b", false},
		{"conjunction", 7.0, ">5&<10", true},
		{"conjunction fails", 12.0, ">5 & <10", false},
		{"not equal", "b", "!a", true},
		{"not equal same", "a", "!a", false},
		{"not equal wildcard", "nginx:latest", "!*:latest", false},
		{"greater number", 6.0, ">5", true},
		{"greater number string", "6", ">5", true},
		{"greater equal", 5.0, ">=5", true},
		{"less equal", 5.0, "<=5", true},
		{"less", 5.0, "<5", false},
		{"space after operator", 5.0, ">= 5", true},
		{"one-char pattern is equality", ">", ">", true},
		{"one-char not is literal", "!", "!", true},
		{"ordering a string is false", "b", ">a", false},
		{"ordering a bool is false", true, ">0", false},
		{"missing value as zero", nil, "<1", true},
		{"missing value as zero, greater", nil, ">1", false},
		{"missing value equals 0", nil, "0", true},
		{"missing value not-equal literal", nil, "!foo", false},
		{"quantity greater", "1Gi", ">1000Mi", true},
		{"quantity milli equals", "0.2", "200m", true},
		{"quantity milli vs float", 0.5, ">=500m", true},
		{"number string equals number", 1024.0, "1024", true},
		{"quantity vs junk", "abc", "<=1Gi", false},
		{"duration greater", "90m", ">1h", true},
		{"duration equal", "60m", "1h", true},
		{"duration not equal", "30m", "!1h", true},
		{"duration vs number value is a quantity compare", 5.0, "<1h", false},
		{"range inside", 5.0, "1-10", true},
		{"range lower bound", 1.0, "1-10", true},
		{"range outside", 11.0, "1-10", false},
		{"range of quantities", "256Mi", "128Mi-512Mi", true},
		{"range of durations", "90m", "1h-2h", true},
		{"range with negative", -5.0, "-10-+8", true},
		{"not in range, below", 0.0, "1!-10", true},
		{"not in range, inside", 5.0, "1!-10", false},
		{"not a range, literal with dash", "a-b", "a-b", true},
		{"semver is not compared", "1.3.0", ">1.2.3", false},
		{"wildcard question star vs empty", "", "?*", false},
		{"wildcard question star vs number", 5.0, "?*", true},
		{"float stringified with E", 5.0, "5E+00", true},
		{"int stringified in decimal", 5, "5", true},
		{"bool stringified", false, "false", true},
		{"nil does not stringify", nil, "*", false},
		{"map value vs string pattern", map[string]any{}, "*", false},
		{"empty string pattern vs empty", "", "", true},
		{"empty string pattern vs zero", 0.0, "", false},
		{"string null literal", "null", "null", true},
		{"string null vs nil", nil, "null", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := MatchValue(tc.value, tc.pattern); got != tc.want {
				t.Errorf("MatchValue(%#v, %#v) = %v, want %v", tc.value, tc.pattern, got, tc.want)
			}
		})
	}
}

func TestParseStringPattern(t *testing.T) {
	sp := parseStringPattern(" >=1Gi & <4Gi | 0 | 1!-2 | 3-4 ")
	if len(sp.alts) != 4 {
		t.Fatalf("got %d alternatives, want 4", len(sp.alts))
	}
	first := sp.alts[0]
	if len(first) != 2 || first[0].op != opMoreEqual || first[0].operand != "1Gi" || !first[0].qtyOK ||
		first[1].op != opLess || first[1].operand != "4Gi" {
		t.Errorf("first alternative parsed as %+v", first)
	}
	if c := sp.alts[2][0]; c.op != opNotInRange || c.lo.operand != "1" || c.hi.operand != "2" {
		t.Errorf("not-in-range parsed as %+v", c)
	}
	if c := sp.alts[3][0]; c.op != opInRange || c.lo.op != opMoreEqual || c.hi.op != opLessEqual {
		t.Errorf("in-range parsed as %+v", c)
	}
	if c := parseComparison("1h"); !c.durOK || c.qtyOK {
		t.Errorf("1h: durOK=%v qtyOK=%v", c.durOK, c.qtyOK)
	}
}
