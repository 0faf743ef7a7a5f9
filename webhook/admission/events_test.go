package admission

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"

	"github.com/charter-dev/charter/webhook/events"
	"github.com/charter-dev/charter/webhook/metrics"
)

// refusingWriter fails every event creation.
type refusingWriter struct{}

func (refusingWriter) Create(context.Context, *eventsv1.Event) error {
	return errors.New("events are forbidden")
}

// An event the sink gives up on shows in kyverno_events_dropped_total.
func TestEventSinkDropsReachMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec, err := metrics.New(reg, "test")
	if err != nil {
		t.Fatal(err)
	}
	sink := events.NewSink(events.Options{Writer: refusingWriter{}, Workers: 1, Attempts: 2, Backoff: time.Millisecond})
	rec.SetEventDrops(sink)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sink.Start(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	pod := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: "web"}
	sink.Offer(events.List{{Regarding: pod, Reason: events.ReasonPolicyViolation, Action: events.ActionResourceBlocked, Note: "refused"}})
	want := `
# HELP kyverno_events_dropped_total Events dropped after their creation failed.
# TYPE kyverno_events_dropped_total counter
kyverno_events_dropped_total{otel_scope_name="kyverno",otel_scope_schema_url="",otel_scope_version=""} 1
`
	eventually(t, "the drop counted", 10*time.Second, func() error {
		return testutil.GatherAndCompare(reg, strings.NewReader(want), metrics.EventsDroppedTotal)
	})
}
