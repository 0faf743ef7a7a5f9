package workload

import (
	"net/http"

	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/webhook/metrics"
	"github.com/charter-dev/charter/webhook/server"
)

// ServeHandler is charter's admission handler serving snapshot as charter
// serve does: resource filters, metrics when rec is set, the audit queue,
// and events to sink when set. The reports controller drains the audit
// queue in charter; here the records are dropped as they come, so the
// queue never fills.
func ServeHandler(snapshot *policycache.Snapshot, rec *metrics.Recorder, sink server.EventSink) http.Handler {
	audit := server.NewAuditQueue(1024, nil)
	go func() {
		for range audit.Records() {
		}
	}()
	return server.NewHandler(server.Options{
		Policies: Fixed{S: snapshot},
		Filters:  server.DefaultResourceFilters("charter"),
		Metrics:  rec,
		Audit:    audit,
		Events:   sink,
	})
}
