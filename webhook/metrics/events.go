package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Names of the event drop counters. kyverno_events_dropped_total counts
// events given up after their creation failed, as Kyverno's does
// (admission-reports.md §3.3); Kyverno drops whole batches silently when
// its queue is full, which charter counts under a name of its own.
const (
	EventsDroppedTotal      = "kyverno_events_dropped_total"
	EventsQueueDroppedTotal = "charter_events_queue_dropped_total"
)

// EventDrops is what the event drop counters read: the admission Events
// sink (events.Sink).
type EventDrops interface {
	// Dropped is the number of events given up after failed creates.
	Dropped() uint64
	// QueueDropped is the number of batches dropped on a full queue.
	QueueDropped() uint64
}

// SetEventDrops makes the event drop counters read d. Until it is called
// (admission Events disabled) they have no series.
func (r *Recorder) SetEventDrops(d EventDrops) {
	if r != nil {
		r.eventDrops.source.Store(&d)
	}
}

// eventDropsCollector reads the counters of the current EventDrops on
// scrape: the sink counts in atomics of its own, and a sink replaced
// (another Setup in one process) hands over without double registration.
type eventDropsCollector struct {
	dropped, queueDropped *prometheus.Desc
	source                atomic.Pointer[EventDrops]
}

func newEventDropsCollector() *eventDropsCollector {
	return &eventDropsCollector{
		dropped:      prometheus.NewDesc(EventsDroppedTotal, "Events dropped after their creation failed.", nil, scope),
		queueDropped: prometheus.NewDesc(EventsQueueDroppedTotal, "Event batches dropped because the event queue was full.", nil, nil),
	}
}

func (c *eventDropsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.dropped
	ch <- c.queueDropped
}

func (c *eventDropsCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.source.Load()
	if d == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64((*d).Dropped()))
	ch <- prometheus.MustNewConstMetric(c.queueDropped, prometheus.CounterValue, float64((*d).QueueDropped()))
}
