package v2

import "testing"

func TestExceptionContains(t *testing.T) {
	spec := PolicyExceptionSpec{Exceptions: []Exception{
		{PolicyName: "disallow-host-path", RuleNames: []string{"host-path", "autogen-host-path"}},
		{PolicyName: "team-a/require-labels", RuleNames: []string{"check-*"}},
		{PolicyName: "restrict-image", RuleNames: []string{"rule-?"}},
	}}
	tests := []struct {
		policy, rule string
		want         bool
	}{
		{"disallow-host-path", "host-path", true},
		{"disallow-host-path", "autogen-host-path", true},
		{"disallow-host-path", "autogen-cronjob-host-path", false},
		{"team-a/require-labels", "check-team", true},
		{"team-a/require-labels", "check-", true},
		{"require-labels", "check-team", false},
		{"restrict-image", "rule-1", true},
		{"restrict-image", "rule-10", false},
		{"other", "host-path", false},
	}
	for _, tt := range tests {
		if got := spec.Contains(tt.policy, tt.rule); got != tt.want {
			t.Errorf("Contains(%q, %q) = %v, want %v", tt.policy, tt.rule, got, tt.want)
		}
	}
}

func TestWildcardMatch(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"", "", true},
		{"*", "", true},
		{"*", "anything", true},
		{"a*c", "abbbc", true},
		{"a*c", "abbbd", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"*-host-*", "autogen-host-path", true},
		{"**x", "x", true},
		{"exact", "exact", true},
		{"exact", "exactly", false},
	}
	for _, tt := range tests {
		if got := wildcardMatch(tt.pattern, tt.s); got != tt.want {
			t.Errorf("wildcardMatch(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}

func TestBackgroundDefault(t *testing.T) {
	f := false
	if !(&PolicyExceptionSpec{}).BackgroundProcessingEnabled() {
		t.Error("absent background: want true")
	}
	if (&PolicyExceptionSpec{Background: &f}).BackgroundProcessingEnabled() {
		t.Error("background false: want false")
	}
}
