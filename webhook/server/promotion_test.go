package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/webhook/events"
	"github.com/charter-dev/charter/webhook/promotion"
)

// recordingGate answers with a fixed denial or error and records what it
// was asked.
type recordingGate struct {
	denial string
	err    error
	calls  []string
	staged []promotion.Policy
}

// DowngradeDenial answers as promotion.Gate does: downgrades are allowed.
func (g *recordingGate) DowngradeDenial(namespace, user, newValue string) string {
	return (&promotion.Gate{}).DowngradeDenial(namespace, user, newValue)
}

func (g *recordingGate) Check(_ context.Context, ns string, staged []promotion.Policy) (string, error) {
	g.calls = append(g.calls, ns)
	g.staged = staged
	return g.denial, g.err
}

// namespaceReview is an AdmissionReview of a Namespace write; nil labels
// leave the object out (old on CREATE).
func namespaceReview(op string, oldLabels, newLabels map[string]string) []byte {
	obj := func(labels map[string]string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": "shop", "labels": labels}}
	}
	req := map[string]any{
		"uid":       "uid-shop",
		"kind":      map[string]any{"group": "", "version": "v1", "kind": "Namespace"},
		"resource":  map[string]any{"group": "", "version": "v1", "resource": "namespaces"},
		"name":      "shop",
		"operation": op,
		"userInfo":  map[string]any{"username": "alice"},
		"object":    obj(newLabels),
	}
	if oldLabels != nil {
		req["oldObject"] = obj(oldLabels)
	}
	body, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
	return body
}

func TestPromotion(t *testing.T) {
	snapshot, err := policycache.Build(loadPolicies(t, "testdata/promotion-policies.yaml"), nil)
	if err != nil || len(snapshot.Errors) > 0 {
		t.Fatalf("test policies: %v %v", err, snapshot.Errors)
	}
	const label = "charter.dev/enforcement"
	none := map[string]string{}
	enforce := map[string]string{label: "enforce"}
	audit := map[string]string{label: "audit"}
	for _, tc := range []struct {
		name               string
		op                 string
		old, new           map[string]string
		gate               recordingGate
		wantAllowed        bool
		wantGateCalled     bool
		wantMessageContain string
	}{
		{name: "create unlabelled", op: "CREATE", new: none, wantAllowed: true},
		{name: "create enforcing, reports clean", op: "CREATE", new: enforce, wantAllowed: true, wantGateCalled: true},
		{name: "promote, reports clean", op: "UPDATE", old: none, new: enforce, wantAllowed: true, wantGateCalled: true},
		{name: "promote from audit, reports fail", op: "UPDATE", old: audit, new: enforce,
			gate:           recordingGate{denial: `namespace "shop" cannot be labelled charter.dev/enforcement=enforce: ...`},
			wantGateCalled: true, wantMessageContain: `namespace "shop" cannot be labelled`},
		{name: "reports unreadable", op: "UPDATE", old: none, new: enforce,
			gate:           recordingGate{err: errors.New(`reading the PolicyReports of namespace "shop": forbidden`)},
			wantGateCalled: true, wantMessageContain: `namespace "shop" cannot be labelled charter.dev/enforcement=enforce now: reading the PolicyReports`},
		{name: "already enforcing: other edits pass ungated", op: "UPDATE", old: enforce,
			new: map[string]string{label: "enforce", "team": "web"}, gate: recordingGate{denial: "must not be asked"}, wantAllowed: true},
		{name: "demote to audit", op: "UPDATE", old: enforce, new: audit, gate: recordingGate{denial: "must not be asked"}, wantAllowed: true},
		{name: "drop the label", op: "UPDATE", old: enforce, new: none, gate: recordingGate{denial: "must not be asked"}, wantAllowed: true},
		{name: "unknown value", op: "UPDATE", old: none, new: map[string]string{label: "Enforce"},
			wantMessageContain: `namespace "shop": label charter.dev/enforcement="Enforce": want "audit" or "enforce"`},
		{name: "unknown value kept from before", op: "UPDATE", old: map[string]string{label: "strict"},
			new: map[string]string{label: "strict", "team": "web"}, wantAllowed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := tc.gate
			h := NewHandler(Options{Policies: staticSnapshots{snapshot}, Promotion: &gate})
			resp := decision(t, h, PathPromotion, namespaceReview(tc.op, tc.old, tc.new))
			if resp.Allowed != tc.wantAllowed {
				t.Errorf("allowed = %v (%v), want %v", resp.Allowed, resp.Result, tc.wantAllowed)
			}
			if tc.wantMessageContain != "" && (resp.Result == nil || !strings.Contains(resp.Result.Message, tc.wantMessageContain)) {
				t.Errorf("result %+v, want a message containing %q", resp.Result, tc.wantMessageContain)
			}
			if called := len(gate.calls) > 0; called != tc.wantGateCalled {
				t.Errorf("gate called %v, want %v", gate.calls, tc.wantGateCalled)
			}
			if tc.wantGateCalled {
				want := []promotion.Policy{{Kind: "ClusterPolicy", Key: "staged", FailClosed: true}, {Kind: "Policy", Key: "shop/local", FailClosed: true},
					{Kind: "ValidatingPolicy", Key: "staged", FailClosed: false}, {Kind: "ClusterPolicy", Key: "staged-fail-open", FailClosed: false}}
				if gate.calls[0] != "shop" || !reflect.DeepEqual(gate.staged, want) {
					t.Errorf("gate asked about %q with %+v, want shop with %+v", gate.calls[0], gate.staged, want)
				}
			}
		})
	}
}

func TestPromotionPathNeedsAGate(t *testing.T) {
	h := NewHandler(Options{Policies: staticSnapshots{policycache.Empty()}})
	if w := post(h, PathPromotion, namespaceReview("CREATE", nil, map[string]string{"charter.dev/enforcement": "enforce"})); w.Code != http.StatusNotFound {
		t.Errorf("POST %s without a gate: HTTP %d, want 404", PathPromotion, w.Code)
	}
}

// TestPromotionWithoutStagedPolicyWarns: labelling a namespace enforce
// while no staged policy applies there changes nothing; the label is
// admitted (it takes effect once a staged policy comes) with a warning
// saying so, and no report is read.
func TestPromotionWithoutStagedPolicyWarns(t *testing.T) {
	snapshot, err := policycache.Build(loadPolicies(t, "testdata/promotion-policies.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	empty, err := policycache.Build(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		snapshot *policycache.Snapshot
		warn     bool
	}{
		{"no staged policy installed", empty, true},
		{"staged policies installed", snapshot, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := recordingGate{}
			h := NewHandler(Options{Policies: staticSnapshots{tc.snapshot}, Promotion: &gate})
			resp := decision(t, h, PathPromotion, namespaceReview("UPDATE", map[string]string{}, map[string]string{"charter.dev/enforcement": "enforce"}))
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			want := `namespace "shop" labelled charter.dev/enforcement=enforce, but no staged policy applies to it`
			warned := len(resp.Warnings) == 1 && strings.HasPrefix(resp.Warnings[0], want)
			if warned != tc.warn {
				t.Errorf("warnings %q; want a warning starting %q: %v", resp.Warnings, want, tc.warn)
			}
			if called := len(gate.calls) > 0; called == tc.warn {
				t.Errorf("gate called: %v, want %v", called, !tc.warn)
			}
		})
	}
}

// offeredEvents records the Events the server offers its sink.
type offeredEvents struct{ events []events.Event }

func (o *offeredEvents) Validated(*engine.Request, []*engine.Response, bool) {}

func (o *offeredEvents) Offer(b events.Batch) bool {
	for e := range b.Events() {
		o.events = append(o.events, *e)
	}
	return true
}

// TestPromotionDowngrade: moving a namespace from enforce back to Audit
// (the label set to audit, or removed) leaves a Warning Event on the
// Namespace naming the user, unless it is a dry run; under
// --promotion-downgrade=deny it is refused, naming the user and the flag.
// Other label changes leave no such Event.
func TestPromotionDowngrade(t *testing.T) {
	snapshot, err := policycache.Build(loadPolicies(t, "testdata/promotion-policies.yaml"), nil)
	if err != nil || len(snapshot.Errors) > 0 {
		t.Fatalf("test policies: %v %v", err, snapshot.Errors)
	}
	const label = "charter.dev/enforcement"
	enforce := map[string]string{label: "enforce"}
	audit := map[string]string{label: "audit"}
	for _, tc := range []struct {
		name     string
		old, new map[string]string
		deny     bool
		dryRun   bool
		want     string // the Event's note, or the denial with deny
	}{
		{name: "to audit", old: enforce, new: audit,
			want: `user "alice" moved namespace "shop" back to Audit: charter.dev/enforcement changed from enforce to audit; staged policies no longer enforce there`},
		{name: "label removed", old: enforce, new: map[string]string{},
			want: `user "alice" moved namespace "shop" back to Audit: charter.dev/enforcement removed (was enforce); staged policies no longer enforce there`},
		{name: "dry run", old: enforce, new: audit, dryRun: true},
		{name: "audit label removed", old: audit, new: map[string]string{}},
		{name: "denied: to audit", old: enforce, new: audit, deny: true,
			want: `namespace "shop": charter.dev/enforcement changed from enforce to audit denied to user "alice": charter serve --promotion-downgrade=deny keeps a namespace that enforces from going back to Audit`},
		{name: "denied: label removed", old: enforce, new: map[string]string{}, deny: true,
			want: `namespace "shop": charter.dev/enforcement removed (was enforce) denied to user "alice": charter serve --promotion-downgrade=deny keeps a namespace that enforces from going back to Audit`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &offeredEvents{}
			h := NewHandler(Options{Policies: staticSnapshots{snapshot}, Promotion: &promotion.Gate{DenyDowngrade: tc.deny}, Events: sink})
			body := namespaceReview("UPDATE", tc.old, tc.new)
			if tc.dryRun {
				body = []byte(strings.Replace(string(body), `"operation":"UPDATE"`, `"operation":"UPDATE","dryRun":true`, 1))
			}
			resp := decision(t, h, PathPromotion, body)
			if tc.deny {
				if resp.Allowed || resp.Result == nil || resp.Result.Message != tc.want {
					t.Errorf("allowed = %v (%+v), want denied with %q", resp.Allowed, resp.Result, tc.want)
				}
				if len(sink.events) != 0 {
					t.Errorf("a refused downgrade left events %+v", sink.events)
				}
				return
			}
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			if tc.want == "" {
				if len(sink.events) != 0 {
					t.Errorf("events %+v, want none", sink.events)
				}
				return
			}
			if len(sink.events) != 1 {
				t.Fatalf("events %+v, want one", sink.events)
			}
			e := sink.events[0]
			if e.Regarding.Kind != "Namespace" || e.Regarding.Name != "shop" || e.Reason != events.ReasonEnforcementDowngraded ||
				e.Type() != "Warning" || e.Note != tc.want {
				t.Errorf("event %+v, want a Warning %s on Namespace shop: %q", e, events.ReasonEnforcementDowngraded, tc.want)
			}
		})
	}
}
