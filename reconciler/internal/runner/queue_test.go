package runner

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// attempts records a handler's calls per item.
type attempts struct {
	mu    sync.Mutex
	calls map[string][]time.Time
}

func (a *attempts) record(item string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.calls == nil {
		a.calls = map[string][]time.Time{}
	}
	a.calls[item] = append(a.calls[item], time.Now())
	return len(a.calls[item])
}

func (a *attempts) count(item string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.calls[item])
}

// TestQueue runs one item through a queue per case and checks how often
// the handler saw it, and what the queue did after.
func TestQueue(t *testing.T) {
	errFailed := errors.New("failed")
	cases := []struct {
		name string
		opts Options[string]
		// handle answers the n-th call (from 1).
		handle func(n int) (time.Duration, error)
		// wantCalls is how many calls the item gets; wantGaveUp whether
		// GiveUp was told.
		wantCalls  int
		wantGaveUp bool
	}{
		{name: "success is done once", handle: func(int) (time.Duration, error) { return 0, nil }, wantCalls: 1},
		{name: "an error retries until success",
			handle: func(n int) (time.Duration, error) {
				if n < 4 {
					return 0, errFailed
				}
				return 0, nil
			}, wantCalls: 4},
		{name: "MaxRetries gives up after that many retries", opts: Options[string]{MaxRetries: 3},
			handle: func(int) (time.Duration, error) { return 0, errFailed }, wantCalls: 4, wantGaveUp: true},
		{name: "requeueAfter looks again", handle: func(n int) (time.Duration, error) {
			if n < 3 {
				return 20 * time.Millisecond, nil
			}
			return 0, nil
		}, wantCalls: 3},
		{name: "MaxDelay caps the backoff below BaseDelay", opts: Options[string]{MaxDelay: time.Millisecond},
			handle: func(n int) (time.Duration, error) {
				if n < 3 {
					return 0, errFailed
				}
				return 0, nil
			}, wantCalls: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var a attempts
			gaveUp := 0
			o := tc.opts
			o.Name = "runner-test"
			o.GiveUp = func(item string, err error) {
				if item != "x" || !errors.Is(err, errFailed) {
					t.Errorf("GiveUp(%q, %v)", item, err)
				}
				gaveUp++
			}
			q := New(o)
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan struct{})
			go func() {
				defer close(ran)
				q.Run(ctx, func(_ context.Context, item string) (time.Duration, error) {
					return tc.handle(a.record(item))
				})
			}()
			q.Add("x")
			waitFor(t, func() bool { return a.count("x") >= tc.wantCalls })
			// Long enough for a wrong extra attempt (the backoff so far is
			// at most 5+10+20 ms).
			time.Sleep(200 * time.Millisecond)
			cancel()
			<-ran
			if n := a.count("x"); n != tc.wantCalls {
				t.Errorf("%d calls, want %d", n, tc.wantCalls)
			}
			if want := map[bool]int{true: 1}[tc.wantGaveUp]; gaveUp != want {
				t.Errorf("gave up %d times, want %d", gaveUp, want)
			}
			if n := q.Retries("x"); n != 0 {
				t.Errorf("%d retries left counted after the item was done", n)
			}
		})
	}
}

// TestRetriesBackOff checks the delays between attempts double.
func TestRetriesBackOff(t *testing.T) {
	var a attempts
	q := New(Options[string]{Name: "runner-test-backoff"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx, func(_ context.Context, item string) (time.Duration, error) {
		if a.record(item) < 6 {
			return 0, errors.New("failed")
		}
		return 0, nil
	})
	q.Add("x")
	waitFor(t, func() bool { return a.count("x") >= 6 })
	a.mu.Lock()
	calls := a.calls["x"]
	a.mu.Unlock()
	// The fifth retry waits BaseDelay×2⁴ = 80ms at least: the five
	// retries together take at least 5+10+20+40+80 ms.
	if took, least := calls[5].Sub(calls[0]), 155*time.Millisecond; took < least {
		t.Errorf("five retries took %s, want at least %s", took, least)
	}
}

// TestWorkqueueMetrics checks a queue reports controller-runtime's
// workqueue_* series under its name.
func TestWorkqueueMetrics(t *testing.T) {
	q := New(Options[string]{Name: "runner-test-metrics"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Run(ctx, func(context.Context, string) (time.Duration, error) { return 0, nil })
	}()
	q.Add("a")
	q.Add("b")
	waitFor(t, func() bool { return metricValue(t, "workqueue_adds_total", "runner-test-metrics") == 2 })
	cancel()
	<-done
	for _, name := range []string{"workqueue_depth", "workqueue_retries_total", "workqueue_work_duration_seconds"} {
		if metricValue(t, name, "runner-test-metrics") < 0 {
			t.Errorf("no %s series for the queue", name)
		}
	}
}

// metricValue is the value (a histogram's count) of the series of family
// name labelled name=queue and controller=queue; -1 if there is none.
func metricValue(t *testing.T, family, queue string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "name") != queue || label(m, "controller") != queue {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return -1
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
