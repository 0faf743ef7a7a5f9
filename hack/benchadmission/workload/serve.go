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
// queue never fills. Each of more changes the options before the
// handler is made (the loaders of a benchmark, say).
func ServeHandler(snapshot *policycache.Snapshot, rec *metrics.Recorder, sink server.EventSink, more ...func(*server.Options)) http.Handler {
	audit := server.NewAuditQueue(1024, nil)
	go func() {
		for range audit.Records() {
		}
	}()
	opts := server.Options{
		Policies: Fixed{S: snapshot},
		Filters:  server.DefaultResourceFilters("charter"),
		Metrics:  rec,
		Audit:    audit,
		Events:   sink,
	}
	for _, change := range more {
		change(&opts)
	}
	return server.NewHandler(opts)
}
