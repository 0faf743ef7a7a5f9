// Package loadgen is an open-loop load generator. Requests fall due at a
// fixed arrival rate whatever happens to earlier ones, and each request's
// latency counts from when it was due, not from when a worker got round
// to sending it: a server that falls behind shows its queue in the
// figures instead of quietly slowing the generator down (the "coordinated
// omission" of closed-loop tools).
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one run's schedule.
type Config struct {
	// Rate is the arrival rate in requests per second.
	Rate float64
	// Duration is the span over which requests fall due: Rate*Duration
	// requests in all.
	Duration time.Duration
	// Workers bounds the requests in flight (the concurrent clients).
	// A request due while every worker is busy waits, and the wait counts
	// in its latency.
	Workers int
	// Drain bounds how long requests still in flight or queued may take
	// after the last one fell due; what is left then is cancelled and
	// counted as ErrDrain. Zero means 10 s.
	Drain time.Duration
	// Offset numbers the first request, so consecutive runs can continue
	// one sequence (the request index picks what is sent).
	Offset int
	// Answered, when set, is called by the worker of every answered
	// request with its index, when it fell due and its latency, before the
	// worker takes the next one: it must be quick (e.g. a threshold check
	// that hands a stall to another goroutine).
	Answered func(i int, due time.Time, latency time.Duration)
}

// Requests is the number of requests the schedule holds.
func (c Config) Requests() int {
	return int(c.Rate * c.Duration.Seconds())
}

func (c Config) validate() error {
	switch {
	case c.Rate <= 0:
		return fmt.Errorf("rate %v: want more than 0 requests per second", c.Rate)
	case c.Duration <= 0:
		return fmt.Errorf("duration %v: want more than 0", c.Duration)
	case c.Workers <= 0:
		return fmt.Errorf("workers %d: want at least 1", c.Workers)
	case c.Requests() == 0:
		return fmt.Errorf("rate %v over %v schedules no request", c.Rate, c.Duration)
	}
	return nil
}

// Func sends request i and reports how it went; a non-nil error counts the
// request as failed. ctx ends when the run's drain time is over.
type Func func(ctx context.Context, i int) error

// ErrDrain is the error of a request still queued or in flight when the
// drain time ran out.
var ErrDrain = errors.New("still queued or in flight when the drain time ran out")

// Results are one run's raw figures.
type Results struct {
	// Latencies holds every answered request's latency, from when it was
	// due until its answer, failed ones included.
	Latencies []time.Duration
	// Errors holds the error of every failed request.
	Errors []error
	// Span is from the first request falling due to the last answer.
	Span time.Duration
}

// Requests is the number of requests accounted for.
func (r *Results) Requests() int { return len(r.Latencies) + countDrained(r.Errors) }

// Rate is the achieved rate: answers per second over the run's span.
func (r *Results) Rate() float64 {
	if r.Span <= 0 {
		return 0
	}
	return float64(len(r.Latencies)) / r.Span.Seconds()
}

// Merge adds another run's figures (e.g. another round of the same
// target); the spans add up.
func (r *Results) Merge(o *Results) {
	r.Latencies = append(r.Latencies, o.Latencies...)
	r.Errors = append(r.Errors, o.Errors...)
	r.Span += o.Span
}

func countDrained(errs []error) int {
	n := 0
	for _, err := range errs {
		if errors.Is(err, ErrDrain) {
			n++
		}
	}
	return n
}

// arrival is a request and the time it falls due.
type arrival struct {
	i   int
	due time.Time
}

// queueCap bounds the queue of due requests. The dispatcher blocks when it
// is full, which is harmless: due times come from the schedule, not from
// the dispatcher's clock, so late requests still count from when they were
// due.
const queueCap = 1 << 16

// Run sends Rate*Duration requests through do, request k falling due at
// start + k/Rate, and returns when every one is answered or the drain time
// is over. It returns an error only for a bad Config or when ctx ends
// first.
func Run(ctx context.Context, cfg Config, do Func) (*Results, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	drain := cfg.Drain
	if drain <= 0 {
		drain = 10 * time.Second
	}
	n := cfg.Requests()
	reqCtx, cancelRequests := context.WithCancel(ctx)
	defer cancelRequests()

	queue := make(chan arrival, min(n, queueCap))
	start := time.Now()
	go dispatch(reqCtx, queue, start, cfg.Rate, n, cfg.Offset)

	type partial struct {
		lat  []time.Duration
		errs []error
		last time.Time
	}
	parts := make([]partial, cfg.Workers)
	var wg sync.WaitGroup
	for w := range parts {
		p := &parts[w]
		p.lat = make([]time.Duration, 0, n/cfg.Workers+1)
		wg.Go(func() {
			for a := range queue {
				if reqCtx.Err() != nil {
					p.errs = append(p.errs, ErrDrain)
					continue
				}
				err := do(reqCtx, a.i)
				end := time.Now()
				if err != nil && reqCtx.Err() != nil {
					// Cut short by the drain deadline, not answered.
					p.errs = append(p.errs, fmt.Errorf("%w: %v", ErrDrain, err))
					continue
				}
				p.lat = append(p.lat, end.Sub(a.due))
				if cfg.Answered != nil {
					cfg.Answered(a.i, a.due, end.Sub(a.due))
				}
				if err != nil {
					p.errs = append(p.errs, err)
				}
				if end.After(p.last) {
					p.last = end
				}
			}
		})
	}

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	lastDue := start.Add(dueOffset(n-1, cfg.Rate))
	deadline := time.NewTimer(time.Until(lastDue) + drain)
	defer deadline.Stop()
	select {
	case <-done:
	case <-deadline.C:
		cancelRequests()
		<-done
	case <-ctx.Done():
		cancelRequests()
		<-done
		return nil, ctx.Err()
	}

	res := &Results{}
	var last time.Time
	for _, p := range parts {
		res.Latencies = append(res.Latencies, p.lat...)
		res.Errors = append(res.Errors, p.errs...)
		if p.last.After(last) {
			last = p.last
		}
	}
	if !last.IsZero() {
		res.Span = last.Sub(start)
	}
	return res, nil
}

// dispatch queues the n requests as they fall due and closes the queue;
// when ctx ends it queues the rest at once so the workers account for them.
func dispatch(ctx context.Context, queue chan<- arrival, start time.Time, rate float64, n, offset int) {
	defer close(queue)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for k := range n {
		due := start.Add(dueOffset(k, rate))
		if wait := time.Until(due); wait > 0 && ctx.Err() == nil {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		queue <- arrival{i: offset + k, due: due}
	}
}

// dueOffset is when request k falls due after the start. It is computed
// from k rather than by adding intervals, so rounding never drifts.
func dueOffset(k int, rate float64) time.Duration {
	return time.Duration(float64(k) * float64(time.Second) / rate)
}

// RunClosed is the closed-loop counterpart of Run, for comparison with
// tools that measure with "virtual users" (k6, as in Kyverno's published
// load tests): each of workers sends its next request as soon as its last
// one is answered, for duration, and latency counts from sending. The rate
// is whatever the server sustains, and queueing inside the server shows,
// but a stall delays the requests behind it without being charged to
// them. Requests are numbered from offset. Requests in flight when
// duration ends finish within drain (zero means 10 s) or count as ErrDrain.
func RunClosed(ctx context.Context, workers int, duration, drain time.Duration, offset int, do Func) (*Results, error) {
	if workers <= 0 {
		return nil, fmt.Errorf("workers %d: want at least 1", workers)
	}
	if duration <= 0 {
		return nil, fmt.Errorf("duration %v: want more than 0", duration)
	}
	if drain <= 0 {
		drain = 10 * time.Second
	}
	reqCtx, cancelRequests := context.WithCancel(ctx)
	defer cancelRequests()
	start := time.Now()
	stopAt := start.Add(duration)
	var next atomic.Int64
	next.Store(int64(offset))
	type partial struct {
		lat  []time.Duration
		errs []error
		last time.Time
	}
	parts := make([]partial, workers)
	var wg sync.WaitGroup
	for w := range parts {
		p := &parts[w]
		wg.Go(func() {
			for time.Now().Before(stopAt) && reqCtx.Err() == nil {
				i := int(next.Add(1) - 1)
				sent := time.Now()
				err := do(reqCtx, i)
				end := time.Now()
				if err != nil && reqCtx.Err() != nil {
					p.errs = append(p.errs, fmt.Errorf("%w: %v", ErrDrain, err))
					continue
				}
				p.lat = append(p.lat, end.Sub(sent))
				if err != nil {
					p.errs = append(p.errs, err)
				}
				p.last = end
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	deadline := time.NewTimer(duration + drain)
	defer deadline.Stop()
	select {
	case <-done:
	case <-deadline.C:
		cancelRequests()
		<-done
	case <-ctx.Done():
		cancelRequests()
		<-done
		return nil, ctx.Err()
	}
	res := &Results{}
	var last time.Time
	for _, p := range parts {
		res.Latencies = append(res.Latencies, p.lat...)
		res.Errors = append(res.Errors, p.errs...)
		if p.last.After(last) {
			last = p.last
		}
	}
	if !last.IsZero() {
		res.Span = last.Sub(start)
	}
	return res, nil
}
