package server

import (
	"testing"

	"github.com/charter-dev/charter/engine"
)

// eventCalls records what the handler hands to the EventSink.
type eventCalls struct {
	blocked []bool
	rules   int
}

func (e *eventCalls) Validated(_ *engine.Request, responses []*engine.Response, blocked bool) {
	e.blocked = append(e.blocked, blocked)
	for _, r := range responses {
		for _, p := range r.Policies {
			e.rules += len(p.Rules)
		}
	}
}

func TestValidateHandsOutcomesToEvents(t *testing.T) {
	bad := compliant()
	bad.image = "nginx"
	delete(bad.labels, "app.kubernetes.io/name")
	dry := bad
	dry.dryRun = true

	tests := []struct {
		name        string
		pod         pod
		wantCalls   []bool
		wantAllowed bool
	}{
		{name: "a denied request is handed over as blocked", pod: bad, wantCalls: []bool{true}},
		{name: "an allowed request is handed over as not blocked", pod: compliant(), wantCalls: []bool{false}, wantAllowed: true},
		{name: "a dry run causes no events", pod: dry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := &eventCalls{}
			h := NewHandler(Options{Policies: staticSnapshots{testSnapshot(t)}, Events: calls})
			if resp := decision(t, h, PathValidateFail, tc.pod.review()); resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed = %v, want %v", resp.Allowed, tc.wantAllowed)
			}
			if len(calls.blocked) != len(tc.wantCalls) {
				t.Fatalf("Validated called %d times, want %d", len(calls.blocked), len(tc.wantCalls))
			}
			for i := range tc.wantCalls {
				if calls.blocked[i] != tc.wantCalls[i] {
					t.Errorf("call %d: blocked = %v, want %v", i, calls.blocked[i], tc.wantCalls[i])
				}
			}
			if len(tc.wantCalls) > 0 && calls.rules == 0 {
				t.Error("handed over no rule responses")
			}
		})
	}
}
