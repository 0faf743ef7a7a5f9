package mutate

import "testing"

// Conditions are validate patterns (engine/pattern); these cases pin the parts mutate
// conditions rely on.
func TestConditionHolds(t *testing.T) {
	tests := []struct {
		name    string
		pattern any
		value   any
		want    bool
	}{
		{"wildcard star", "nginx:*", "nginx:latest", true},
		{"wildcard question needs one char", "?*", "", false},
		{"wildcard question on number", "?*", int64(5), true},
		{"star matches empty string", "*", "", true},
		{"star does not match nil", "*", nil, false},
		{"alternation", "a | b", "b", true},
		{"conjunction", ">1 & <5", int64(3), true},
		{"conjunction fails", ">1 & <5", int64(7), false},
		{"negation", "!kube-system", "default", true},
		{"negation fails", "!kube-system", "kube-system", false},
		{"greater than", ">2", int64(3), true},
		{"greater than float", ">2", 2.5, true},
		{"numeric string compares as quantity", ">=1", "2", true},
		{"quantity units", ">1000Mi", "1Gi", true},
		{"duration", "<1h", "30m", true},
		{"range inside", "1-10", int64(10), true},
		{"range outside", "1!-10", int64(11), true},
		{"missing value is zero for numeric operator", "<1", nil, true},
		{"missing value with string operand", "!foo", nil, false},
		{"string gt is false", ">abc", "abd", false},
		{"bool", true, true, true},
		{"bool is not string", true, "true", false},
		{"int equals int", int64(3), 3.0, true},
		{"int equals numeric string", int64(3), "3", true},
		{"null matches zero values", nil, "", true},
		{"null does not match maps", nil, map[string]any{}, false},
		{"empty map pattern matches any map", map[string]any{}, map[string]any{"a": "b"}, true},
		{"map pattern needs map", map[string]any{"a": "b"}, "x", false},
		{"nested map", map[string]any{"disk": "ssd"}, map[string]any{"disk": "ssd", "x": "y"}, true},
		{"nested condition unmet is not a hold", map[string]any{"(disk)": "ssd"}, map[string]any{"disk": "hdd"}, false},
		{"negation anchor", map[string]any{"X(hostNetwork)": "null"}, map[string]any{"hostNetwork": true}, false},
		{"equality anchor absent passes", map[string]any{"=(a)": "x"}, map[string]any{}, true},
		{"plain star key requires presence", map[string]any{"a": "*"}, map[string]any{}, false},
		{"list of maps every element", []any{map[string]any{"name": "c*"}}, []any{map[string]any{"name": "c1"}, map[string]any{"name": "d"}}, false},
		{"list of maps conditional elements skipped", []any{map[string]any{"(name)": "c*", "image": "x"}}, []any{map[string]any{"name": "c1", "image": "x"}, map[string]any{"name": "d"}}, true},
		{"scalar over list", "a*", []any{"ab", "ac"}, true},
		{"existence anchor", map[string]any{"^(c)": []any{map[string]any{"n": "x"}}}, map[string]any{"c": []any{map[string]any{"n": "y"}, map[string]any{"n": "x"}}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := conditionHolds(tt.pattern, tt.value); got != tt.want {
				t.Errorf("conditionHolds(%#v, %#v) = %v, want %v", tt.pattern, tt.value, got, tt.want)
			}
		})
	}
}
