package server

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/charter-dev/charter/engine"
)

// AuditRecord is the outcome of one allowed, non-dry-run admission request,
// handed to the reports controller so the results reach PolicyReports.
type AuditRecord struct {
	// UID is the admission request's UID.
	UID types.UID
	// Request is what was evaluated.
	Request *engine.Request
	// Responses are the engine's responses, one per policy set evaluated.
	Responses []*engine.Response
	// Time is when the decision was made.
	Time time.Time
}

// AuditSink takes the outcome of allowed admission requests. Offer must
// never block the admission path: it reports false when it dropped the
// record.
type AuditSink interface {
	Offer(rec AuditRecord) bool
}

var _ AuditSink = (*AuditQueue)(nil)

// AuditQueue is the bounded hand-off from admission to the reports
// controller. Admission never waits on it: when it is full the record is
// dropped and counted, because an answer to the API server matters more
// than a report that the next background scan rebuilds anyway.
type AuditQueue struct {
	records chan AuditRecord
	onDrop  func()
}

// NewAuditQueue returns a queue holding up to capacity records; onDrop, if
// not nil, is called for each record dropped.
func NewAuditQueue(capacity int, onDrop func()) *AuditQueue {
	return &AuditQueue{records: make(chan AuditRecord, capacity), onDrop: onDrop}
}

// Offer enqueues the record without blocking and reports whether it fit.
func (q *AuditQueue) Offer(rec AuditRecord) bool {
	select {
	case q.records <- rec:
		return true
	default:
		if q.onDrop != nil {
			q.onDrop()
		}
		return false
	}
}

// Records is the channel the consumer reads.
func (q *AuditQueue) Records() <-chan AuditRecord { return q.records }
