package reports

import (
	"sync/atomic"
	"time"

	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/internal/droplog"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// Resource names the resource an admission request was about. UID is
// required: reports are named and owned by it. For a CREATE the webhook
// sees the UID the API server assigned in request.object.metadata.uid.
type Resource = report.Scope

// AdmissionResults accepts the results of admission evaluations. The
// admission webhook calls Enqueue after an allowed request, with the
// engine's validate responses (Audit and Enforce passes alike: §6.1 writes
// both); it must not call it for dry runs, DELETE requests, Events, denied
// requests or objects without a UID. Enqueue never blocks: it reports
// false when the queue is full and the results were dropped, which is safe
// because the background scan rebuilds every report of a background
// policy.
type AdmissionResults interface {
	Enqueue(resource Resource, responses []engine.PolicyResponse) bool
}

// admissionItem is one admission's results, stamped when they were
// produced: the merge keeps the newest result of each rule.
type admissionItem struct {
	resource  Resource
	responses []engine.PolicyResponse
	at        time.Time
}

// AdmissionQueue is the bounded, in-process AdmissionResults that the
// replica's AdmissionWriter drains. Create one with NewAdmissionQueue, give
// it to the webhook and to Options.Admission. Its contents are not
// durable: a crash loses at most its capacity in results; the next scan
// restores those of background policies.
type AdmissionQueue struct {
	items   chan admissionItem
	dropped atomic.Int64
	now     func() time.Time
	// onDrop counts a drop in the process's metrics; dropLog says it in
	// the log. Both are set before admission starts (OnDrop, and the
	// writer that drains the queue).
	onDrop  func()
	dropLog atomic.Pointer[droplog.Log]
}

var _ AdmissionResults = (*AdmissionQueue)(nil)

// DefaultAdmissionQueueSize is a sensible capacity: large enough to absorb
// a burst of a few seconds of admissions, small enough to bound memory.
const DefaultAdmissionQueueSize = 1000

// NewAdmissionQueue returns a queue holding up to size admissions.
func NewAdmissionQueue(size int) *AdmissionQueue {
	if size <= 0 {
		size = DefaultAdmissionQueueSize
	}
	return &AdmissionQueue{items: make(chan admissionItem, size), now: time.Now}
}

// Enqueue implements AdmissionResults.
func (q *AdmissionQueue) Enqueue(resource Resource, responses []engine.PolicyResponse) bool {
	if resource.UID == "" || len(responses) == 0 {
		return false
	}
	select {
	case q.items <- admissionItem{resource: resource, responses: responses, at: q.now()}:
		return true
	default:
		q.drop(resource, "queue full")
		return false
	}
}

// OnDrop has f called for every admission's results dropped, by a full
// queue or by its writer's bound on resources waiting for their report
// (charter serve counts them in charter_audit_queue_dropped_total). Call
// it before the queue is used.
func (q *AdmissionQueue) OnDrop(f func()) { q.onDrop = f }

// drop counts and logs the results of one admission given up.
func (q *AdmissionQueue) drop(resource Resource, why string) {
	q.dropped.Add(1)
	if q.onDrop != nil {
		q.onDrop()
	}
	if l := q.dropLog.Load(); l != nil {
		// The resource as it is: formatted (String) only when a line is
		// written, at most every 10 s, not at every drop.
		l.Dropped("why", why, "resource", resource)
	}
}

// Results takes the background controller's responses for a trigger
// (its GeneratingPolicy and mutate-existing MutatingPolicy runs) into the
// queue, so the trigger's report shows them: the queue is the
// background controller's Options.Results.
func (q *AdmissionQueue) Results(trigger generate.ObjectRef, responses []engine.PolicyResponse) {
	q.Enqueue(Resource{APIVersion: trigger.APIVersion, Kind: trigger.Kind, Namespace: trigger.Namespace, Name: trigger.Name, UID: trigger.UID}, responses)
}

// Dropped counts the admissions whose results were dropped: the queue
// was full, or so many resources waited for their reports that the
// writer took no more (MaxPendingResources).
func (q *AdmissionQueue) Dropped() int64 { return q.dropped.Load() }
