package events

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/internal/droplog"
)

// Defaults, as Kyverno's flags have them (admission-reports.md §3.3).
const (
	// DefaultMaxQueued bounds the batches waiting to be written
	// (--maxQueuedEvents).
	DefaultMaxQueued = 1000
	// DefaultWorkers write events concurrently.
	DefaultWorkers = 2
	// DefaultAttempts is how often a create is tried before the event is
	// dropped and counted.
	DefaultAttempts = 3
	// DefaultQPS and DefaultBurst rate-limit the event creates
	// (--events-rate-limit-qps, --events-rate-limit-burst). Every create
	// costs the API server and etcd a write: at 1,000 admissions a second
	// with half the Pods failing audited rules, unlimited (1,000/s) they
	// were 500 to 660 creates a second, and on the 2 cores of make
	// bench-admission MODE=split charter's p99 was 1.7 to 2.5 times the
	// null webhook's; at 100/s it was 1.05 to 1.14 times (docs/scale.md).
	// The rest wait in the queue, and what does not fit is dropped and
	// counted: events are best effort, answers are not.
	DefaultQPS   = 100
	DefaultBurst = 200
)

// DefaultOmit are the reasons Kyverno's Helm chart leaves out
// (--omitEvents=PolicyApplied,PolicySkipped): one event per admitted
// request would flood the events store.
var DefaultOmit = []string{ReasonPolicyApplied, ReasonPolicySkipped}

// Writer creates an Event in the cluster.
type Writer interface {
	Create(ctx context.Context, ev *eventsv1.Event) error
}

// NewWriter returns a Writer on a client of its own, rate-limited at qps
// with burst (DefaultQPS and DefaultBurst when 0) so events neither starve
// nor are starved by the controllers sharing cfg, and never take the API
// server's time from admission: a create waits for its turn in the
// writer's goroutine, the queue behind it fills, and what does not fit is
// dropped and counted (Sink.Offer).
func NewWriter(cfg *rest.Config, qps float32, burst int) (Writer, error) {
	if qps <= 0 {
		qps = DefaultQPS
	}
	if burst <= 0 {
		burst = DefaultBurst
	}
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = qps, burst
	c.UserAgent = rest.DefaultKubernetesUserAgent() + " charter-events"
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, fmt.Errorf("events client: %w", err)
	}
	return clientsetWriter{cs}, nil
}

type clientsetWriter struct{ cs kubernetes.Interface }

const mergePatch = types.MergePatchType

func (w clientsetWriter) Create(ctx context.Context, ev *eventsv1.Event) error {
	_, err := w.cs.EventsV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}

// Options configure a Sink.
type Options struct {
	// Writer creates the events. Required.
	Writer Writer
	// Source is the reportingController (default SourceAdmission).
	Source string
	// Instance is the reportingInstance (default "<source>-<hostname>").
	Instance string
	// MaxQueued bounds the batches waiting (default DefaultMaxQueued).
	MaxQueued int
	// Workers write concurrently (default DefaultWorkers).
	Workers int
	// Attempts per event before it is dropped (default DefaultAttempts).
	Attempts int
	// Backoff is the wait before the second attempt, doubled after each
	// (default 200 ms).
	Backoff time.Duration
	// Omit lists reasons never written (see DefaultOmit).
	Omit []string
	// SuccessEvents emits PolicyApplied for requests that passed
	// (Kyverno's generateSuccessEvents; default off).
	SuccessEvents bool
	// SeriesFlush, SeriesEnd and MaxSeries tune how repeats of an event
	// are aggregated into its series (defaults DefaultSeriesFlush,
	// DefaultSeriesEnd, DefaultMaxSeries).
	SeriesFlush time.Duration
	SeriesEnd   time.Duration
	MaxSeries   int
	// SpamBurst and SpamInterval bound the events created about one
	// object, as client-go's recorder does: SpamBurst at once, then one
	// per SpamInterval (defaults DefaultSpamBurst, DefaultSpamInterval).
	SpamBurst    int
	SpamInterval time.Duration
	Log          logr.Logger
}

// Sink writes events off the caller's path. Offer never blocks: when the
// queue is full the batch is dropped and counted. An event seen again
// while its series runs is not written again: its count grows and is
// written with one PATCH per series every SeriesFlush, as client-go's
// events recorder does, so a resource failing the same rule on every
// request costs one create and a patch every 30 s, not one write per
// request; and, again as client-go's recorder, the events created about one
// object are rate-limited (25 at once, then one per 5 minutes): a policy
// failing on every new Pod does not turn each admission into an API
// write. It is a
// manager.Runnable that runs in every replica (each emits the events of
// the requests it answers). Its drop counters (Dropped, QueueDropped) are
// exported by webhook/metrics as kyverno_events_dropped_total and
// charter_events_queue_dropped_total.
type Sink struct {
	o     Options
	queue chan Batch
	omit  map[string]bool

	queueDropped atomic.Uint64
	dropped      atomic.Uint64
	// lastNanos keeps event name suffixes unique within the process.
	lastNanos atomic.Int64

	mu      sync.Mutex
	series  map[seriesKey]*series
	repeats atomic.Uint64

	spam         *spamFilter
	spamFiltered atomic.Uint64

	// queueFull says the batches a full queue drops in the log, at most
	// once per droplog.DefaultInterval.
	queueFull *droplog.Log
}

// NewSink returns a sink; Start it (or add it to a manager) to write.
func NewSink(o Options) *Sink {
	if o.Source == "" {
		o.Source = SourceAdmission
	}
	if o.Instance == "" {
		host, _ := os.Hostname()
		o.Instance = o.Source + "-" + host
	}
	if len(o.Instance) > 128 {
		o.Instance = o.Instance[:128]
	}
	if o.MaxQueued <= 0 {
		o.MaxQueued = DefaultMaxQueued
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	if o.Backoff <= 0 {
		o.Backoff = 200 * time.Millisecond
	}
	if o.SeriesFlush <= 0 {
		o.SeriesFlush = DefaultSeriesFlush
	}
	if o.SeriesEnd <= 0 {
		o.SeriesEnd = DefaultSeriesEnd
	}
	if o.MaxSeries <= 0 {
		o.MaxSeries = DefaultMaxSeries
	}
	if o.SpamBurst <= 0 {
		o.SpamBurst = DefaultSpamBurst
	}
	if o.SpamInterval <= 0 {
		o.SpamInterval = DefaultSpamInterval
	}
	s := &Sink{o: o, queue: make(chan Batch, o.MaxQueued), omit: map[string]bool{}, series: map[seriesKey]*series{},
		spam:      newSpamFilter(o.SpamBurst, o.SpamInterval),
		queueFull: droplog.New(o.Log, "events dropped: the event queue is full (charter_events_queue_dropped_total counts the batches)", 0)}
	for _, r := range o.Omit {
		s.omit[r] = true
	}
	return s
}

// Offer queues a batch without blocking and reports whether it fit; a
// batch that does not is counted and said in the log.
func (s *Sink) Offer(b Batch) bool {
	select {
	case s.queue <- b:
		return true
	default:
		s.queueDropped.Add(1)
		s.queueFull.Dropped("queued", s.o.MaxQueued)
		return false
	}
}

// Validated queues the events of a validated admission request (the
// webhook server's EventSink). A request that would make no event (every
// rule passed, or skipped by preconditions) is not queued at all, so the
// common case costs a loop over its rules and nothing else.
func (s *Sink) Validated(req *engine.Request, responses []*engine.Response, blocked bool) {
	if !s.o.SuccessEvents && !s.makesEvents(responses) {
		return
	}
	s.Offer(Admission{Request: req, Responses: responses, Blocked: blocked, SuccessEvents: s.o.SuccessEvents})
}

// makesEvents reports whether some rule failed or errored, or was skipped
// by a PolicyException while PolicySkipped events are wanted.
func (s *Sink) makesEvents(responses []*engine.Response) bool {
	for _, resp := range responses {
		for _, p := range resp.Policies {
			for _, r := range p.Rules {
				if isViolation(r.Status) || (len(r.Exceptions) > 0 && !s.omit[ReasonPolicySkipped]) {
					return true
				}
			}
		}
	}
	return false
}

// QueueDropped is the number of batches dropped because the queue was full.
func (s *Sink) QueueDropped() uint64 { return s.queueDropped.Load() }

// Dropped is the number of events given up after failed creates.
func (s *Sink) Dropped() uint64 { return s.dropped.Load() }

// SpamFiltered is the number of events not created because their object
// had more than its share (see Options.SpamBurst).
func (s *Sink) SpamFiltered() uint64 { return s.spamFiltered.Load() }

// NeedLeaderElection is false: every replica writes its own events.
func (s *Sink) NeedLeaderElection() bool { return false }

// Start writes queued batches until ctx ends; what is still queued then is
// dropped (events are best effort).
func (s *Sink) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(s.o.SeriesFlush)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				s.flushSeries(ctx, now)
			}
		}
	})
	for range s.o.Workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case b := <-s.queue:
					s.writeBatch(ctx, b)
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// writeBatch writes the events of b whose reason is not omitted.
func (s *Sink) writeBatch(ctx context.Context, b Batch) {
	for ev := range b.Events() {
		if !s.omit[ev.Reason] {
			s.write(ctx, ev)
		}
	}
}

// write creates one event, retrying with backoff; a name collision gets a
// fresh name at once. A repeat of an event whose series runs is only
// counted. Only an event to be created asks the spam filter, and only one
// the filter lets through has its note formatted (apiEvent): at a steady
// stream of violations, most events are held back and cost no text.
func (s *Sink) write(ctx context.Context, e *Event) {
	now := time.Now()
	key := keyOf(e)
	if s.repeat(key, now) {
		return
	}
	if !s.spam.allow(e, now) {
		// Not created, so no series to count repeats into: the next
		// one asks the filter again.
		s.spamFiltered.Add(1)
		return
	}
	repeat, tracked := s.track(key, now)
	if repeat {
		return
	}
	backoff := s.o.Backoff
	var err error
	for attempt := 0; attempt < s.o.Attempts; attempt++ {
		if attempt > 0 && !apierrors.IsAlreadyExists(err) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff *= 2
		}
		now := time.Now()
		ev := apiEvent(e, eventName(e.Regarding.Name, s.nanos(now)), s.o.Source, s.o.Instance, now)
		err = s.o.Writer.Create(ctx, ev)
		if err == nil {
			if tracked {
				s.created(key, ev.Namespace, ev.Name)
			}
			return
		}
		if ctx.Err() != nil {
			break
		}
	}
	if tracked {
		s.failed(key)
	}
	if ctx.Err() != nil {
		return
	}
	s.dropped.Add(1)
	s.o.Log.Error(err, "dropping event", "reason", e.Reason, "regarding", e.Regarding.Kind+"/"+e.Regarding.Namespace+"/"+e.Regarding.Name)
}

// nanos returns now in nanoseconds, or one more than the last value handed
// out, so two events on one object never share a name.
func (s *Sink) nanos(now time.Time) int64 {
	n := now.UnixNano()
	for {
		last := s.lastNanos.Load()
		if n <= last {
			n = last + 1
		}
		if s.lastNanos.CompareAndSwap(last, n) {
			return n
		}
	}
}
