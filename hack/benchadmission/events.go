package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/webhook/events"
	"github.com/charter-dev/charter/webhook/server"
)

// countingWriter counts the API writes of the event sink: creates, and
// PATCHes of a series' count.
type countingWriter struct {
	w       events.Writer
	creates atomic.Uint64
	series  atomic.Uint64
	sink    *events.Sink // its drops are counted too
}

// eventCounts are running totals: API writes, and the requests' batches
// (queue full) and events (failed creates) the sink gave up, and the
// events its spam filter held back.
type eventCounts struct{ creates, series, queueDropped, dropped, spamFiltered uint64 }

func (c *countingWriter) Create(ctx context.Context, ev *eventsv1.Event) error {
	c.creates.Add(1)
	return c.w.Create(ctx, ev)
}

func (c *countingWriter) UpdateSeries(ctx context.Context, namespace, name string, series *eventsv1.EventSeries) error {
	c.series.Add(1)
	sw, ok := c.w.(events.SeriesWriter)
	if !ok {
		return nil
	}
	return sw.UpdateSeries(ctx, namespace, name, series)
}

// counts is zero without events.
func (c *countingWriter) counts() eventCounts {
	if c == nil {
		return eventCounts{}
	}
	return eventCounts{creates: c.creates.Load(), series: c.series.Load(), queueDropped: c.sink.QueueDropped(), dropped: c.sink.Dropped(), spamFiltered: c.sink.SpamFiltered()}
}

// startEventSink starts a local control plane and the event sink charter
// serve's admission runs (events.NewWriter's client and rate limit, the
// default omitted reasons), writing to it; namespace is created for the
// events about the reviewed Pods. stop stops both.
func startEventSink(ctx context.Context, namespace string) (*events.Sink, *countingWriter, func(), error) {
	fmt.Fprintln(os.Stderr, "starting a local control plane for charter's events")
	cp, err := controlplane.Start(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg := cp.RESTConfig()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = cp.Stop()
		return nil, nil, nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		_ = cp.Stop()
		return nil, nil, nil, fmt.Errorf("namespace %s: %w", namespace, err)
	}
	w, err := events.NewWriter(cfg, 0, 0)
	if err != nil {
		_ = cp.Stop()
		return nil, nil, nil, err
	}
	counting := &countingWriter{w: w}
	sink := events.NewSink(events.Options{Writer: counting, Source: events.SourceAdmission, Omit: events.DefaultOmit})
	counting.sink = sink
	sinkCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := sink.Start(sinkCtx); err != nil {
			fmt.Fprintln(os.Stderr, "bench-admission: event sink:", err)
		}
	}()
	stop := func() {
		cancel()
		<-done
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench-admission: stopping the control plane:", err)
		}
	}
	return sink, counting, stop, nil
}

// eventSinkFor is startEventSink when the bench writes events (-events),
// and nothing to start otherwise: stop is then a no-op and the writer nil.
func eventSinkFor(ctx context.Context, o directOptions) (server.EventSink, *countingWriter, func(), error) {
	if !o.events {
		return nil, nil, func() {}, nil
	}
	sink, writes, stop, err := startEventSink(ctx, "bench")
	if err != nil {
		return nil, nil, nil, err
	}
	return sink, writes, stop, nil
}
