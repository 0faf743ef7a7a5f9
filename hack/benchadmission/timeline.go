package main

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/charter-dev/charter/hack/benchadmission/loadgen"
)

// timeline keeps when every answered request of the measured rounds fell
// due and how long it took, per webhook, so a tail can be read against
// time: slow answers spread over the run (each request's own cost) or
// packed into a few moments (a stall of the process or the machine: a
// collection, a burst of background work). With -profile-dir it is
// written as latency-<rate>.csv (webhook, due in ms from the process's
// start, latency in µs) and summed up by clusters.
type timeline struct {
	mu      sync.Mutex
	answers map[string][]timedAnswer
}

type timedAnswer struct {
	due     time.Time
	latency time.Duration
}

func newTimeline() *timeline { return &timeline{answers: map[string][]timedAnswer{}} }

// answered returns the load generator's hook for webhook's requests,
// calling next too.
func (t *timeline) answered(webhook string, next func(int, time.Time, time.Duration)) func(int, time.Time, time.Duration) {
	if t == nil {
		return next
	}
	return func(i int, due time.Time, latency time.Duration) {
		t.mu.Lock()
		t.answers[webhook] = append(t.answers[webhook], timedAnswer{due, latency})
		t.mu.Unlock()
		if next != nil {
			next(i, due, latency)
		}
	}
}

// write writes every answer to path as CSV.
func (t *timeline) write(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "webhook,due_ms,latency_us")
	t.mu.Lock()
	for _, name := range slices.Sorted(maps.Keys(t.answers)) {
		for _, a := range t.answers[name] {
			fmt.Fprintf(w, "%s,%.3f,%d\n", name, float64(a.due.Sub(processStart))/float64(time.Millisecond), a.latency.Microseconds())
		}
	}
	t.mu.Unlock()
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// clusters sums up webhook's answers slower than threshold: how many, and
// in how many windows of width window they fell (a run of adjacent
// windows counts once), with the worst such burst's size.
func (t *timeline) clusters(webhook string, threshold, window time.Duration) (slow, bursts, largest int) {
	t.mu.Lock()
	answers := slices.Clone(t.answers[webhook])
	t.mu.Unlock()
	slices.SortFunc(answers, func(a, b timedAnswer) int { return a.due.Compare(b.due) })
	var (
		lastWindow int64 = -2
		size       int
	)
	for _, a := range answers {
		if a.latency < threshold {
			continue
		}
		slow++
		w := a.due.UnixNano() / int64(window)
		if w > lastWindow+1 {
			bursts++
			size = 0
		}
		size++
		largest = max(largest, size)
		lastWindow = w
	}
	return slow, bursts, largest
}

// report writes the timeline to path and says on stderr how the answers
// slower than the null webhook's p99 spread over time, per webhook.
func (t *timeline) report(path string, targets []*webhookTarget) error {
	if err := t.write(path); err != nil {
		return fmt.Errorf("latency timeline: %w", err)
	}
	var threshold time.Duration
	for _, tg := range targets {
		if tg.null {
			threshold = loadgen.Summarize(slices.Clone(tg.results.Latencies)).P99
		}
	}
	if threshold == 0 {
		return nil
	}
	const window = 100 * time.Millisecond
	fmt.Fprintf(os.Stderr, "%s: due_ms counts from this process's start, unix time %.3f s\n", path, float64(processStart.UnixNano())/1e9)
	for _, tg := range targets {
		slow, bursts, largest := t.clusters(tg.name, threshold, window)
		fmt.Fprintf(os.Stderr, "%s: %d answers slower than the null webhook's p99 (%s) in %d bursts (windows of %s), the largest %d; every answer in %s\n",
			tg.name, slow, threshold.Round(10*time.Microsecond), bursts, window, largest, path)
	}
	return nil
}
