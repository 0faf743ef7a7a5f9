package events

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine"
)

// recorder is a Writer that keeps what it was given and fails the first
// failures calls with err.
type recorder struct {
	mu       sync.Mutex
	events   []*eventsv1.Event
	calls    int
	failures int
	err      error
	block    chan struct{}
}

func (r *recorder) Create(_ context.Context, ev *eventsv1.Event) error {
	if r.block != nil {
		<-r.block
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.calls <= r.failures {
		return r.err
	}
	r.events = append(r.events, ev)
	return nil
}

func (r *recorder) written() []*eventsv1.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*eventsv1.Event(nil), r.events...)
}

// waitTimeout is how long waitFor waits for its condition: generous, as a
// loaded 2-core CI machine may stall a goroutine or an API call for
// seconds; a condition that holds ends the wait at once.
const waitTimeout = time.Minute

// waitFor polls cond until it holds; on timeout the failure names what
// was awaited and, when given, what was seen instead.
func waitFor(t *testing.T, what string, cond func() bool, seen ...func() string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			for _, f := range seen {
				t.Log(f())
			}
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func startSink(t *testing.T, o Options) *Sink {
	t.Helper()
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	s := NewSink(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func TestSinkWritesKyvernoShapedEvents(t *testing.T) {
	w := &recorder{}
	s := startSink(t, Options{Writer: w, Instance: "kyverno-admission-host"})
	s.Offer(List{
		{Regarding: cpolRef, Related: related(podObj), Reason: ReasonPolicyViolation, Action: ActionResourceBlocked, Note: "n1"},
		{Regarding: cpolRef, Related: related(podObj), Reason: ReasonPolicyViolation, Action: ActionResourceBlocked, Note: "n2"},
		{Regarding: podObj, Reason: ReasonPolicyApplied, Action: ActionResourcePassed, Note: "ok"},
	})
	waitFor(t, "three events", func() bool { return len(w.written()) == 3 })
	names := map[string]bool{}
	for _, ev := range w.written() {
		if ev.ReportingController != "kyverno-admission" || ev.ReportingInstance != "kyverno-admission-host" {
			t.Errorf("reporting %s/%s", ev.ReportingController, ev.ReportingInstance)
		}
		if ev.EventTime.IsZero() {
			t.Errorf("%s: no eventTime", ev.Name)
		}
		if names[ev.Name] {
			t.Errorf("two events named %s", ev.Name)
		}
		names[ev.Name] = true
		switch ev.Note {
		case "n1", "n2":
			// ClusterPolicy events land in default.
			if ev.Namespace != "default" || ev.Type != corev1.EventTypeWarning || !strings.HasPrefix(ev.Name, "require-labels.") {
				t.Errorf("policy event %s/%s type %s", ev.Namespace, ev.Name, ev.Type)
			}
		case "ok":
			if ev.Namespace != "default" || ev.Type != corev1.EventTypeNormal || ev.Related != nil {
				t.Errorf("resource event %+v", ev)
			}
		}
	}
}

func TestSinkOmitsReasons(t *testing.T) {
	w := &recorder{}
	s := startSink(t, Options{Writer: w, Omit: DefaultOmit})
	s.Offer(List{
		{Regarding: podObj, Reason: ReasonPolicyApplied, Action: ActionResourcePassed, Note: "omitted"},
		{Regarding: podObj, Reason: ReasonPolicySkipped, Action: ActionResourcePassed, Note: "omitted"},
		{Regarding: podObj, Reason: ReasonPolicyViolation, Action: ActionResourcePassed, Note: "kept"},
	})
	waitFor(t, "the violation", func() bool { return len(w.written()) == 1 })
	time.Sleep(50 * time.Millisecond)
	if got := w.written(); len(got) != 1 || got[0].Note != "kept" {
		t.Fatalf("written %+v", got)
	}
}

func TestSinkRetriesThenDropsAndCounts(t *testing.T) {
	w := &recorder{failures: 4, err: apierrors.NewServiceUnavailable("etcd down")}
	s := startSink(t, Options{Writer: w, Workers: 1, Backoff: time.Millisecond})
	s.Offer(List{{Regarding: podObj, Reason: ReasonPolicyViolation, Action: ActionResourcePassed, Note: "first"}})
	waitFor(t, "the drop", func() bool { return s.Dropped() == 1 })
	// The second event's first attempt fails (call 4), its second succeeds.
	s.Offer(List{{Regarding: podObj, Reason: ReasonPolicyViolation, Action: ActionResourcePassed, Note: "second"}})
	waitFor(t, "the retried write", func() bool { return len(w.written()) == 1 })
	if s.Dropped() != 1 || w.written()[0].Note != "second" {
		t.Errorf("dropped %d, written %+v", s.Dropped(), w.written())
	}
}

func TestSinkNameCollisionRetriesAtOnce(t *testing.T) {
	w := &recorder{failures: 1, err: apierrors.NewAlreadyExists(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "x")}
	s := startSink(t, Options{Writer: w, Attempts: 2, Backoff: time.Hour})
	s.Offer(List{{Regarding: podObj, Reason: ReasonPolicyViolation, Action: ActionResourcePassed}})
	waitFor(t, "the write", func() bool { return len(w.written()) == 1 })
}

func TestSinkOfferNeverBlocks(t *testing.T) {
	w := &recorder{block: make(chan struct{})}
	var (
		mu    sync.Mutex
		lines []string
	)
	log := funcr.New(func(_, args string) { mu.Lock(); lines = append(lines, args); mu.Unlock() }, funcr.Options{})
	s := startSink(t, Options{Writer: w, Workers: 1, MaxQueued: 2, Log: log})
	defer close(w.block)
	ev := List{{Regarding: podObj, Reason: ReasonPolicyViolation, Action: ActionResourcePassed}}
	// One batch is taken by the blocked worker, two fill the queue.
	s.Offer(ev)
	waitFor(t, "the worker to take the first batch", func() bool { return len(s.queue) == 0 })
	start := time.Now()
	results := []bool{s.Offer(ev), s.Offer(ev), s.Offer(ev), s.Offer(ev)}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Offer took %v with a full queue", d)
	}
	if want := []bool{true, true, false, false}; !slices.Equal(results, want) {
		t.Errorf("Offer results %v, want %v", results, want)
	}
	if s.QueueDropped() != 2 {
		t.Errorf("queue dropped %d, want 2", s.QueueDropped())
	}
	// Said in the log, the first drop at once; the second, within the
	// interval, waits for the next line.
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 1 || !strings.Contains(lines[0], "events dropped: the event queue is full") || !strings.Contains(lines[0], `"dropped"=1`) {
		t.Errorf("log lines %q, want one saying the first drop", lines)
	}
}

func TestValidatedQueuesOnlyWhatMakesEvents(t *testing.T) {
	passed := response(podRef, engine.PolicyResponse{Policy: clusterPolicy, Key: "require-labels", Rules: []engine.RuleResponse{pass("a", engine.Enforce)}})
	failed := response(podRef, engine.PolicyResponse{Policy: clusterPolicy, Key: "require-labels", Rules: []engine.RuleResponse{fail("a", "m", engine.Audit)}})
	preconditions := response(podRef, engine.PolicyResponse{Policy: clusterPolicy, Key: "require-labels",
		Rules: []engine.RuleResponse{{Name: "a", Status: engine.StatusSkip, Message: "preconditions not met"}}})
	excepted := response(podRef, engine.PolicyResponse{Policy: clusterPolicy, Key: "require-labels",
		Rules: []engine.RuleResponse{{Name: "a", Status: engine.StatusSkip, Exceptions: []*kyvernov2.PolicyException{exception}}}})
	tests := []struct {
		name      string
		opts      Options
		responses []*engine.Response
		want      bool
	}{
		{"all passed", Options{}, passed, false},
		{"a failure", Options{}, failed, true},
		{"skipped by preconditions", Options{}, preconditions, false},
		{"skipped by an exception, PolicySkipped omitted", Options{Omit: DefaultOmit}, excepted, false},
		{"skipped by an exception, PolicySkipped wanted", Options{}, excepted, true},
		{"all passed, success events on", Options{SuccessEvents: true}, passed, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Writer, tc.opts.Log = &recorder{}, logr.Discard()
			s := NewSink(tc.opts)
			s.Validated(podRequest, tc.responses, false)
			if got := len(s.queue) == 1; got != tc.want {
				t.Errorf("queued = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAPIEvent(t *testing.T) {
	long := strings.Repeat("é", 600) // 1200 bytes
	ev := apiEvent(&Event{Regarding: podObj, Reason: ReasonPolicyViolation, Action: ActionResourcePassed, Note: long},
		"nginx.1", SourceAdmission, "i", time.Unix(1, 0))
	if len(ev.Note) > noteLimit || !strings.HasSuffix(ev.Note, "...") || !strings.HasPrefix(long, strings.TrimSuffix(ev.Note, "...")) {
		t.Errorf("note of %d bytes not cut on a rune boundary to the limit: %q", len(ev.Note), ev.Note[len(ev.Note)-10:])
	}
	if ev.Namespace != "default" {
		t.Errorf("namespace %q", ev.Namespace)
	}
}

func TestEventName(t *testing.T) {
	tests := []struct{ regarding, want string }{
		{"nginx", "nginx.ff"},
		{"kyverno:admission-controller", "kyverno-admission-controller.ff"},
		{"UPPER_case", "upper-case.ff"},
		{"", "event.ff"},
		{strings.Repeat("a", 300), strings.Repeat("a", 250) + ".ff"},
	}
	for _, tc := range tests {
		got := eventName(tc.regarding, 255)
		if got != tc.want {
			t.Errorf("eventName(%q) = %q, want %q", tc.regarding, got, tc.want)
		}
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("eventName(%q) = %q: %v", tc.regarding, got, errs)
		}
	}
}

// seriesRecorder is a recorder that also takes series updates.
type seriesRecorder struct {
	recorder
	updates map[string]eventsv1.EventSeries
}

func (r *seriesRecorder) UpdateSeries(_ context.Context, namespace, name string, series *eventsv1.EventSeries) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.updates == nil {
		r.updates = map[string]eventsv1.EventSeries{}
	}
	r.updates[namespace+"/"+name] = *series
	return nil
}

func (r *seriesRecorder) update(key string) (eventsv1.EventSeries, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.updates[key]
	return s, ok
}

// The same event seen again is counted in the series of the first one, as
// client-go's events recorder does: one create, then one PATCH of the
// count per flush, never one write per occurrence. Another note (another
// rule) is another event.
func TestSinkAggregatesRepeatsIntoSeries(t *testing.T) {
	w := &seriesRecorder{}
	s := startSink(t, Options{Writer: w, Workers: 1, SeriesFlush: 20 * time.Millisecond, SeriesEnd: time.Hour})
	rule := func(note string) Event {
		return Event{Regarding: cpolRef, Related: related(podObj), Reason: ReasonPolicyViolation, Action: ActionNone, Note: note}
	}
	for range 100 {
		s.Offer(List{rule("[a] fail"), rule("[b] fail")})
	}
	waitFor(t, "all 200 occurrences", func() bool { return s.Repeats() == 198 })
	if got := w.written(); len(got) != 2 || got[0].Note == got[1].Note {
		t.Fatalf("created %d events, want one per rule: %+v", len(got), got)
	}
	for _, ev := range w.written() {
		key := ev.Namespace + "/" + ev.Name
		waitFor(t, "the series of "+key, func() bool {
			series, ok := w.update(key)
			return ok && series.Count == 100 && !series.LastObservedTime.IsZero()
		})
	}
}

// A series ends when its event has not been seen for SeriesEnd: the next
// occurrence is a new event.
func TestSinkSeriesEnd(t *testing.T) {
	w := &seriesRecorder{}
	s := startSink(t, Options{Writer: w, Workers: 1, SeriesFlush: 10 * time.Millisecond, SeriesEnd: 50 * time.Millisecond})
	ev := List{{Regarding: podObj, Reason: ReasonPolicyViolation, Action: ActionNone, Note: "x"}}
	s.Offer(ev)
	waitFor(t, "the first event", func() bool { return len(w.written()) == 1 })
	time.Sleep(100 * time.Millisecond)
	s.Offer(ev)
	waitFor(t, "a second event after the series ended", func() bool { return len(w.written()) == 2 })
	if s.Repeats() != 0 {
		t.Errorf("repeats %d, want 0", s.Repeats())
	}
}

// With MaxSeries reached, events are written untracked rather than lost.
func TestSinkMaxSeries(t *testing.T) {
	w := &seriesRecorder{}
	s := startSink(t, Options{Writer: w, Workers: 1, MaxSeries: 1, SeriesEnd: time.Hour})
	a := List{{Regarding: podObj, Reason: ReasonPolicyViolation, Action: ActionNone, Note: "a"}}
	b := List{{Regarding: podObj, Reason: ReasonPolicyViolation, Action: ActionNone, Note: "b"}}
	s.Offer(a)
	s.Offer(b)
	s.Offer(b)
	s.Offer(a)
	waitFor(t, "a, b, b written", func() bool { return len(w.written()) == 3 })
	waitFor(t, "the repeat of a counted", func() bool { return s.Repeats() == 1 })
}

// TestSinkSpamFilter: the events created about one object are limited as
// client-go's recorder limits them (a burst, then one per interval);
// another object has its own allowance.
func TestSinkSpamFilter(t *testing.T) {
	w := &recorder{}
	s := startSink(t, Options{Writer: w, Workers: 1, SpamBurst: 3, SpamInterval: time.Hour})
	policy := corev1.ObjectReference{APIVersion: "kyverno.io/v1", Kind: "ClusterPolicy", Name: "require-labels", UID: "p1"}
	violation := func(regarding corev1.ObjectReference, pod string) List {
		related := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "shop", Name: pod}
		return List{{Regarding: regarding, Related: &related, Reason: ReasonPolicyViolation, Action: ActionNone, Note: "Pod shop/" + pod + ": fail"}}
	}
	for i := range 5 {
		s.Offer(violation(policy, fmt.Sprintf("web-%d", i)))
	}
	other := policy
	other.Name, other.UID = "disallow-latest-tag", "p2"
	s.Offer(violation(other, "web-0"))
	waitFor(t, "3 events about require-labels and 1 about disallow-latest-tag, 2 filtered", func() bool {
		return len(w.written()) == 4 && s.SpamFiltered() == 2
	})
	byPolicy := map[string]int{}
	for _, ev := range w.written() {
		byPolicy[ev.Regarding.Name]++
	}
	if byPolicy["require-labels"] != 3 || byPolicy["disallow-latest-tag"] != 1 {
		t.Errorf("events by policy %v, want require-labels 3, disallow-latest-tag 1", byPolicy)
	}
}

// TestSpamFilterRefill: the bucket refills at one token per interval, up to
// the burst; the least recently seen object is forgotten past the limit.
func TestSpamFilterRefill(t *testing.T) {
	f := newSpamFilter(2, time.Minute)
	at := time.Unix(1000, 0)
	ev := &Event{Regarding: corev1.ObjectReference{Kind: "ClusterPolicy", Name: "p"}, Reason: ReasonPolicyViolation}
	for i, want := range []bool{true, true, false} {
		if got := f.allow(ev, at); got != want {
			t.Errorf("event %d at once: allowed %v, want %v", i, got, want)
		}
	}
	if f.allow(ev, at.Add(59*time.Second)) {
		t.Error("allowed before a token came back")
	}
	if !f.allow(ev, at.Add(61*time.Second)) || f.allow(ev, at.Add(62*time.Second)) {
		t.Error("want exactly one event a minute after the burst")
	}
	// A long quiet spell refills up to the burst only.
	later := at.Add(time.Hour)
	if !f.allow(ev, later) || !f.allow(ev, later) || f.allow(ev, later) {
		t.Error("want the burst again, and no more, after an hour")
	}
	for i := range maxSpamObjects {
		f.allow(&Event{Regarding: corev1.ObjectReference{Kind: "Pod", Name: fmt.Sprint(i)}}, later)
	}
	if len(f.buckets) != maxSpamObjects || f.lru.Len() != maxSpamObjects {
		t.Errorf("tracking %d objects (%d in the LRU), want at most %d", len(f.buckets), f.lru.Len(), maxSpamObjects)
	}
	if f.allow(ev, later) != true {
		t.Error("a forgotten object starts again with a full bucket")
	}
}

// TestSinkHeldBackEventsCostNoText: an admission's events are formatted
// only when created. Once the spam filter holds back every event about
// the policies, the sink's work for a review failing 17 of them allocates
// a few objects per review, not one note (and reference) per event, which
// cost 124 allocations and 21 KB per review when notes were built first.
func TestSinkHeldBackEventsCostNoText(t *testing.T) {
	batches := admissions(200, 17, true)
	s := NewSink(Options{Writer: &recorder{}, Omit: DefaultOmit, Log: logr.Discard()})
	ctx := context.Background()
	for _, a := range batches[:100] {
		s.writeBatch(ctx, a)
	}
	filtered := s.SpamFiltered()
	i := 100
	allocs := testing.AllocsPerRun(100, func() {
		s.writeBatch(ctx, batches[i%len(batches)])
		i++
	})
	if got := s.SpamFiltered() - filtered; got < 100*17 {
		t.Fatalf("%d events held back, want every one of %d", got, 100*17)
	}
	if allocs > 8 {
		t.Errorf("%.0f allocations per review whose 17 events are all held back, want at most 8", allocs)
	}
}

// TestSinkCreatesAdmissionEventsWithTheirNotes: the notes formatted late
// are the ones AdmissionEvents builds, and the Event written keeps its own
// copy of the related object (the batch reuses its Event).
func TestSinkCreatesAdmissionEventsWithTheirNotes(t *testing.T) {
	w := &recorder{}
	s := startSink(t, Options{Writer: w, Workers: 1})
	batches := admissions(2, 2, false)
	for _, a := range batches {
		s.Offer(a)
	}
	var want []Event
	for _, a := range batches {
		want = append(want, AdmissionEvents(a.Request, a.Responses, a.Blocked, false)...)
	}
	waitFor(t, "every event", func() bool { return len(w.written()) == len(want) })
	for i, ev := range w.written() {
		if ev.Note != want[i].Note || !reflect.DeepEqual(ev.Related, want[i].Related) || ev.Regarding != want[i].Regarding {
			t.Errorf("event %d: note %q related %+v regarding %+v\nwant note %q related %+v regarding %+v",
				i, ev.Note, ev.Related, ev.Regarding, want[i].Note, want[i].Related, want[i].Regarding)
		}
	}
	if !strings.HasPrefix(want[0].Note, "Pod bench/pod-0: [check] fail; validation error: ") ||
		!strings.HasPrefix(want[1].Note, "policy policy-0/check fail: validation error: ") {
		t.Errorf("notes %q, %q", want[0].Note, want[1].Note)
	}
}
