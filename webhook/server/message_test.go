package server

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The hand-written denial body is byte for byte what the YAML encoder
// writes, and common denials take the hand-written path.
func TestFormatBlockedMatchesYAML(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []blockedRule
		// hand is whether formatBlocked must take these itself.
		hand bool
	}{
		{"pod security", []blockedRule{
			{"disallow-privileged-containers", "privileged-containers", "validation error: Privileged mode is disallowed. The fields spec.containers[*].securityContext.privileged must be unset or set to `false`. rule privileged-containers failed at path /spec/containers/0/securityContext/privileged/"},
			{"disallow-capabilities", "adding-capabilities", "Any capabilities added beyond the allowed list (AUDIT_WRITE, CHOWN) are disallowed."},
			{"disallow-capabilities", "autogen-adding-capabilities", "it's a 'quoted' message: with a colon"},
		}, true},
		{"plain message", []blockedRule{{"require-labels", "check-team", "label team is required"}}, true},
		{"same rule twice, the later wins", []blockedRule{
			{"require-labels", "check", "first"}, {"require-labels", "check", "second"},
		}, true},
		{"hash after a space", []blockedRule{{"p", "r", "see #42"}}, true},
		{"hash inside a word", []blockedRule{{"p", "r", "see#42"}}, true},
		{"trailing colon", []blockedRule{{"p", "r", "missing:"}}, true},
		{"trailing space", []blockedRule{{"p", "r", "missing "}}, true},
		{"colon inside a word", []blockedRule{{"p", "r", "image nginx:latest"}}, true},
		{"letters sort before dashes after a digit", []blockedRule{{"p1-a", "r", "m"}, {"p1a", "r", "m"}}, false},
		{"numbers sort by value", []blockedRule{{"p", "rule10", "m"}, {"p", "rule9", "m"}}, false},
		{"boolean-like message", []blockedRule{{"p", "r", "yes"}}, false},
		{"boolean-like rule", []blockedRule{{"p", "On", "m"}}, false},
		{"multi-line message", []blockedRule{{"p", "r", "line one\nline two"}}, false},
		{"empty message", []blockedRule{{"p", "r", ""}}, false},
		{"message starting with a quote", []blockedRule{{"p", "r", "'quoted'"}}, false},
		{"non-ASCII message", []blockedRule{{"p", "r", "réservé"}}, false},
		{"tab in message", []blockedRule{{"p", "r", "a\tb"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := formatBlocked(append([]blockedRule(nil), tc.lines...))
			if ok != tc.hand {
				t.Fatalf("formatBlocked took it: %v, want %v", ok, tc.hand)
			}
			if !ok {
				return
			}
			want, err := yamlBlocked(tc.lines)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("formatBlocked\n%q\nYAML encoder\n%q", got, want)
			}
		})
	}
}

// On random names and messages over the characters that matter to YAML,
// whatever formatBlocked takes it writes as the YAML encoder does.
func TestFormatBlockedRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 10))
	// Mostly characters formatBlocked takes, with a few it leaves to the
	// encoder, so that both paths are exercised.
	const keyChars = "abcabcXYZXYZ--..y0_"
	const valueChars = "abcXYZabcXYZ   ::##''\"-._09[]{}!&*?|>%@`,y\t"
	word := func(chars string, n int) string {
		var b strings.Builder
		if rng.IntN(10) > 0 {
			b.WriteByte("abyXYZ"[rng.IntN(6)])
		}
		for range rng.IntN(n) + 1 {
			b.WriteByte(chars[rng.IntN(len(chars))])
		}
		return b.String()
	}
	taken := 0
	for range 20000 {
		var lines []blockedRule
		for range rng.IntN(3) + 1 {
			lines = append(lines, blockedRule{policy: word(keyChars, 4), rule: word(keyChars, 4), message: word(valueChars, 12)})
		}
		got, ok := formatBlocked(append([]blockedRule(nil), lines...))
		if !ok {
			continue
		}
		taken++
		want, err := yamlBlocked(lines)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%q\nformatBlocked\n%q\nYAML encoder\n%q", lines, got, want)
		}
	}
	if taken < 100 {
		t.Errorf("formatBlocked took only %d random cases", taken)
	}
	t.Logf("formatBlocked took %d of 20000 random cases", taken)
}
