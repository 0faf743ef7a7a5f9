package main

import (
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/reconciler/reports"
	"github.com/charter-dev/charter/webhook/server"
)

// recordingResults is a reports.AdmissionResults that remembers what it
// was given.
type recordingResults struct {
	resources []reports.Resource
	responses [][]engine.PolicyResponse
}

func (r *recordingResults) Enqueue(res reports.Resource, responses []engine.PolicyResponse) bool {
	r.resources = append(r.resources, res)
	r.responses = append(r.responses, responses)
	return true
}

func TestReportsAuditSink(t *testing.T) {
	pod := func(uid string) map[string]any {
		meta := map[string]any{"name": "web", "namespace": "team-a"}
		if uid != "" {
			meta["uid"] = uid
		}
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta}
	}
	response := func(kind string, policies ...string) *engine.Response {
		r := &engine.Response{Resource: engine.ResourceRef{APIVersion: "v1", Kind: kind, Namespace: "team-a", Name: "web"}}
		for _, p := range policies {
			r.Policies = append(r.Policies, engine.PolicyResponse{Rules: []engine.RuleResponse{{Name: p, Status: engine.StatusFail}}})
		}
		return r
	}
	tests := []struct {
		name     string
		record   server.AuditRecord
		accepted bool
		rules    int
	}{
		{
			name:     "a stored Pod's results from two policy sets become one admission",
			record:   server.AuditRecord{Request: &engine.Request{Object: pod("u-1")}, Responses: []*engine.Response{response("Pod", "a"), response("Pod", "b", "c")}},
			accepted: true, rules: 3,
		},
		{
			name:   "an object without a UID yet has no report to write",
			record: server.AuditRecord{Request: &engine.Request{Object: pod("")}, Responses: []*engine.Response{response("Pod", "a")}},
		},
		{
			name:   "a deletion is not reported",
			record: server.AuditRecord{Request: &engine.Request{Operation: kyvernov1.Delete, Object: pod("u-1")}, Responses: []*engine.Response{response("Pod", "a")}},
		},
		{
			name:   "a dry run is not reported",
			record: server.AuditRecord{Request: &engine.Request{DryRun: true, Object: pod("u-1")}, Responses: []*engine.Response{response("Pod", "a")}},
		},
		{
			name:   "Events are not reported",
			record: server.AuditRecord{Request: &engine.Request{Object: pod("u-1")}, Responses: []*engine.Response{response("Event", "a")}},
		},
		{
			name:   "no responses, nothing to report",
			record: server.AuditRecord{Request: &engine.Request{Object: pod("u-1")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordingResults{}
			got := reportsAuditSink{queue: rec}.Offer(tt.record)
			if got != tt.accepted {
				t.Fatalf("Offer() = %v, want %v", got, tt.accepted)
			}
			if !tt.accepted {
				if len(rec.resources) != 0 {
					t.Fatalf("enqueued %v, want nothing", rec.resources)
				}
				return
			}
			want := reports.Resource{APIVersion: "v1", Kind: "Pod", Namespace: "team-a", Name: "web", UID: "u-1"}
			if len(rec.resources) != 1 || rec.resources[0] != want {
				t.Fatalf("enqueued %+v, want %+v", rec.resources, want)
			}
			rules := 0
			for _, p := range rec.responses[0] {
				rules += len(p.Rules)
			}
			if rules != tt.rules {
				t.Fatalf("enqueued %d rule responses, want %d", rules, tt.rules)
			}
		})
	}
}
