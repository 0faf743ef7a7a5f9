package main

import (
	"k8s.io/apimachinery/pkg/types"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/reconciler/reports"
	"github.com/charter-dev/charter/webhook/server"
)

// reportsAuditSink hands the admission webhook's results to the reports
// controller's queue. It lives here, where both are wired, because
// webhook/ and reconciler/ do not import each other.
type reportsAuditSink struct {
	queue reports.AdmissionResults
}

var _ server.AuditSink = reportsAuditSink{}

// Offer implements server.AuditSink. Requests that cannot have a report
// are dropped here, as reports.AdmissionResults asks: deletions, Events,
// and objects without a UID yet (a mutating review of a CREATE).
func (s reportsAuditSink) Offer(rec server.AuditRecord) bool {
	req := rec.Request
	if req == nil || req.Operation == kyvernov1.Delete || req.DryRun || len(rec.Responses) == 0 {
		return false
	}
	uid := objectUID(req.Object)
	if uid == "" {
		return false
	}
	ref := rec.Responses[0].Resource
	if ref.Kind == "Event" {
		return false
	}
	n := 0
	for _, r := range rec.Responses {
		n += len(r.Policies)
	}
	responses := make([]engine.PolicyResponse, 0, n)
	for _, r := range rec.Responses {
		responses = append(responses, r.Policies...)
	}
	return s.queue.Enqueue(reports.Resource{
		APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, UID: uid,
	}, responses)
}

func objectUID(obj map[string]any) types.UID {
	meta, _ := obj["metadata"].(map[string]any)
	uid, _ := meta["uid"].(string)
	return types.UID(uid)
}
