package events

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Series defaults, as client-go's events.k8s.io/v1 recorder has them
// (k8s.io/client-go/tools/events): an event seen again is not written
// again but counted in the series of the first one, and a series ends
// after six minutes without a new occurrence.
const (
	// DefaultSeriesFlush is how often the counts of ongoing series are
	// written (one PATCH per series that grew).
	DefaultSeriesFlush = 30 * time.Second
	// DefaultSeriesEnd is how long a series waits for its next occurrence.
	DefaultSeriesEnd = 6 * time.Minute
	// DefaultMaxSeries bounds the series remembered; past it an event is
	// written without being tracked, as before there were series.
	DefaultMaxSeries = 10000
)

// SeriesWriter writes the series of an event created earlier. A Writer
// that is not one still has its repeats counted, never written.
type SeriesWriter interface {
	UpdateSeries(ctx context.Context, namespace, name string, series *eventsv1.EventSeries) error
}

func (w clientsetWriter) UpdateSeries(ctx context.Context, namespace, name string, series *eventsv1.EventSeries) error {
	patch, err := json.Marshal(map[string]any{"series": series})
	if err != nil {
		return err
	}
	_, err = w.cs.EventsV1().Events(namespace).Patch(ctx, name, mergePatch, patch, metav1.PatchOptions{})
	return err
}

// seriesKey says which events are the same event seen again. client-go's
// recorder leaves the note out of its key; charter keeps it (or what it is
// made of, unformatted), so two rules failing on one object stay two
// events, each with its own count.
type seriesKey struct {
	regarding, related   corev1.ObjectReference
	reason, action, note string
	text                 noteText
}

func keyOf(e *Event) seriesKey {
	k := seriesKey{regarding: e.Regarding, reason: e.Reason, action: e.Action, note: e.Note, text: e.text}
	if e.Related != nil {
		k.related = *e.Related
	}
	return k
}

// series is one event as created and how often it was seen since. While
// its create is in flight, namespace and name are empty: repeats are
// counted all the same.
type series struct {
	namespace, name string
	count           int32
	last            time.Time
	dirty           bool
}

// repeat reports whether the event of key continues a series, and counts
// it if so.
func (s *Sink) repeat(key seriesKey, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.countRepeat(key, now)
}

func (s *Sink) countRepeat(key seriesKey, now time.Time) bool {
	sr, ok := s.series[key]
	if !ok || now.Sub(sr.last) >= s.o.SeriesEnd {
		return false
	}
	sr.count++
	sr.last = now
	sr.dirty = true
	s.repeats.Add(1)
	return true
}

// track starts the series of an event the caller is about to create. It
// reports a repeat instead when another worker started that series since
// repeat was asked, and tracked false when MaxSeries are tracked already.
func (s *Sink) track(key seriesKey, now time.Time) (repeat, tracked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.countRepeat(key, now) {
		return true, true
	}
	if _, ended := s.series[key]; !ended && len(s.series) >= s.o.MaxSeries {
		return false, false
	}
	s.series[key] = &series{count: 1, last: now}
	return false, true
}

// created records where the first event of a series was written; failed
// forgets a series whose first event could not be written.
func (s *Sink) created(key seriesKey, namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sr, ok := s.series[key]; ok {
		sr.namespace, sr.name = namespace, name
	}
}

func (s *Sink) failed(key seriesKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.series, key)
}

// flushSeries writes the counts of the series that grew since the last
// flush and forgets the series that ended.
func (s *Sink) flushSeries(ctx context.Context, now time.Time) {
	type update struct {
		namespace, name string
		series          eventsv1.EventSeries
	}
	var updates []update
	s.mu.Lock()
	for k, sr := range s.series {
		if sr.name == "" {
			continue
		}
		if sr.dirty {
			sr.dirty = false
			updates = append(updates, update{sr.namespace, sr.name,
				eventsv1.EventSeries{Count: sr.count, LastObservedTime: metav1.NewMicroTime(sr.last)}})
		}
		if now.Sub(sr.last) >= s.o.SeriesEnd {
			delete(s.series, k)
		}
	}
	s.mu.Unlock()
	sw, ok := s.o.Writer.(SeriesWriter)
	if !ok {
		return
	}
	for _, u := range updates {
		if err := sw.UpdateSeries(ctx, u.namespace, u.name, &u.series); err != nil && ctx.Err() == nil {
			// The event may be gone (TTL): its count is lost, not retried.
			s.o.Log.V(1).Info("event series not updated", "event", u.namespace+"/"+u.name, "error", err.Error())
		}
	}
}

// Repeats is the number of events counted in a series instead of written.
func (s *Sink) Repeats() uint64 { return s.repeats.Load() }
