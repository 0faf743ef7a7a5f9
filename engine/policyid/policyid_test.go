package policyid

import "testing"

// TestParseAndFor: Parse splits what For joins; the key of a ClusterPolicy
// or Policy is its ID.
func TestParseAndFor(t *testing.T) {
	for _, tc := range []struct{ id, kind, key string }{
		{"x", "", "x"},
		{"team/x", "", "team/x"},
		{"ValidatingPolicy:x", "ValidatingPolicy", "x"},
		{"NamespacedValidatingPolicy:team/x", "NamespacedValidatingPolicy", "team/x"},
	} {
		if kind, key := Parse(tc.id); kind != tc.kind || key != tc.key {
			t.Errorf("Parse(%q) = %q, %q; want %q, %q", tc.id, kind, key, tc.kind, tc.key)
		}
		if tc.kind != "" && For(tc.kind, tc.key) != tc.id {
			t.Errorf("For(%q, %q) = %q, want %q", tc.kind, tc.key, For(tc.kind, tc.key), tc.id)
		}
	}
}
