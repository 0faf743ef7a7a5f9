package server

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
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

// A ValidatingPolicy denies and warns in the words of Kyverno's vpol
// webhook, after the ClusterPolicy map when both block; an unscored
// ValidatingPolicy's failure still denies (the annotation changes only
// the report), and an error let through by failurePolicy Ignore does not
// warn unless the policy has validationActions Warn.
func TestCELPolicyDenialAndWarnings(t *testing.T) {
	cp := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "require-labels"}}
	vp := &policiesv1.ValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
	warn := &policiesv1.ValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "warned"},
		Spec: policiesv1.ValidatingPolicySpec{ValidationAction: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit, admissionregistrationv1.Warn}}}
	rule := func(status engine.RuleStatus, action engine.Action, msg string) engine.RuleResponse {
		return engine.RuleResponse{Status: status, Action: action, Message: msg, Type: engine.TypeValidation}
	}
	resp := func(policies ...engine.PolicyResponse) []*engine.Response {
		return []*engine.Response{{Resource: engine.ResourceRef{Kind: "Pod", Namespace: "default", Name: "p"}, Policies: policies}}
	}
	for _, tc := range []struct {
		name     string
		in       []*engine.Response
		blocks   bool
		denial   string
		warnings []string
	}{{
		name:   "failure and error",
		in:     resp(engine.PolicyResponse{Policy: vp, Rules: []engine.RuleResponse{rule(engine.StatusFail, engine.Enforce, "team must be a")}}, engine.PolicyResponse{Policy: warn, Rules: []engine.RuleResponse{rule(engine.StatusError, engine.Audit, "error: no such key: labels")}}),
		blocks: true, denial: "Policy team failed: team must be a",
	}, {
		name:   "both kinds block",
		in:     resp(engine.PolicyResponse{Policy: cp, Rules: []engine.RuleResponse{{Name: "check", Status: engine.StatusFail, Action: engine.Enforce, Message: "label app is required"}}}, engine.PolicyResponse{Policy: vp, Rules: []engine.RuleResponse{rule(engine.StatusError, engine.Enforce, "error: boom")}}),
		blocks: true, denial: "\n\nresource Pod/default/p was blocked due to the following policies \n\nrequire-labels:\n  check: label app is required\n\nPolicy team error: error: boom",
	}, {
		name:   "unscored failure",
		in:     resp(engine.PolicyResponse{Policy: vp, Rules: []engine.RuleResponse{rule(engine.StatusWarn, engine.Enforce, "team must be a")}}),
		blocks: true, denial: "Policy team failed: team must be a",
	}, {
		name: "error under Ignore is silent",
		in:   resp(engine.PolicyResponse{Policy: vp, Rules: []engine.RuleResponse{rule(engine.StatusError, engine.Enforce, "error: boom")}}),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := blocks(tc.in[0], false); got != tc.blocks {
				t.Fatalf("blocks under Ignore = %v, want %v", got, tc.blocks)
			}
			if tc.blocks {
				if got := blockedMessage(tc.in); got != tc.denial {
					t.Errorf("denial\n%q\nwant\n%q", got, tc.denial)
				}
				return
			}
			if got := warnings(tc.in); !slices.Equal(got, tc.warnings) {
				t.Errorf("warnings %q, want %q", got, tc.warnings)
			}
		})
	}
	if got := warnings(resp(engine.PolicyResponse{Policy: warn, Rules: []engine.RuleResponse{rule(engine.StatusFail, engine.Audit, "m")}})); !slices.Equal(got, []string{"Policy warned failed: m"}) {
		t.Errorf("Warn policy's warnings %q", got)
	}
}

// A denial names the errors of the policies that fail closed only: one of
// failurePolicy Ignore that errs denied nothing (Kyverno's
// OnlyEnforcedErrorsInMessage).
func TestDenialLeavesOutIgnoredErrors(t *testing.T) {
	policy := func(name string) *policiesv1.ValidatingPolicy {
		return &policiesv1.ValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	errored := engine.RuleResponse{Status: engine.StatusError, Action: engine.Enforce, Message: "error: no such key: team", Type: engine.TypeValidation}
	failed := engine.RuleResponse{Status: engine.StatusFail, Action: engine.Enforce, Message: "team must be a", Type: engine.TypeValidation}
	ref := engine.ResourceRef{Kind: "Pod", Namespace: "default", Name: "p"}
	responses := []*engine.Response{
		{Resource: ref, Policies: []engine.PolicyResponse{{Policy: policy("enforced"), Rules: []engine.RuleResponse{errored}}}},
		{Resource: ref, Policies: []engine.PolicyResponse{
			{Policy: policy("ignored"), Rules: []engine.RuleResponse{errored}},
			{Policy: policy("ignored-but-failing"), Rules: []engine.RuleResponse{failed}},
		}},
	}
	sets := []scopedSet{{failClosed: true}, {failClosed: false}}
	got := blockedMessage(deniedBy(responses, sets))
	want := "Policy enforced error: error: no such key: team; Policy ignored-but-failing failed: team must be a"
	if got != want {
		t.Errorf("denial %q, want %q", got, want)
	}
	if len(responses[1].Policies) != 2 {
		t.Error("deniedBy changed the responses it was given")
	}
}
