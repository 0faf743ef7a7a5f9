package server

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"
)

// DefaultMaxInFlightPerCPU is how many reviews the server evaluates at
// once per CPU (GOMAXPROCS) unless Options.MaxInFlight says otherwise.
// Evaluation is mostly CPU: more at once only shares the CPUs among more
// reviews, lengthening each, and starves everything else of the process
// (at 64 per CPU, TestReliabilityOverload saw reviews shed after 4 s
// instead of at once). The margin above one per CPU is for reviews
// waiting on the API server or a registry (context lookups, image
// verification), which hold a slot without using a CPU.
const DefaultMaxInFlightPerCPU = 16

// maxQueueWait is the longest a review waits for a slot before it is
// shed: a burst or a stall of the process (a GC, CPU throttling, a busy
// node) is absorbed, a sustained overload is answered well within the API
// server's timeout (10 s) rather than at it.
const maxQueueWait = 2 * time.Second

// waitingPerSlot is how many reviews may wait for a slot, per slot. A
// waiting review holds a goroutine and its connection (some 20 KiB), not
// its body (read once it has a slot), so the room is generous: a stall
// of the process piles up reviews that get their slots within
// maxQueueWait. At one per slot and 500 ms, a soak at 500 reviews/s on a
// busy 2-core machine shed 36 of 30,000 in a minute whose p99 was 10 ms;
// at 8 per slot, 456 in a minute when the machine stalled for a second.
const waitingPerSlot = 32

// inFlightLimit bounds the reviews evaluated at once, and the reviews
// waiting for one of them, so that load beyond capacity is shed with a
// fast, clear error (429 Too Many Requests) instead of queueing without
// bound until every review in the queue times out (issue #31 part 5).
// The API server applies the webhook's failurePolicy to a shed review, as
// to any failed call: Ignore admits it unevaluated, Fail refuses it.
type inFlightLimit struct {
	slots chan struct{}
	// waiting counts the reviews waiting for a slot; at most waitRoom
	// may.
	waiting  atomic.Int64
	waitRoom int64
	wait     time.Duration
}

// newInFlightLimit allows max reviews at once (the default per CPU when
// max is 0); nil, no limit, when max is negative.
func newInFlightLimit(max int) *inFlightLimit {
	if max < 0 {
		return nil
	}
	if max == 0 {
		max = DefaultMaxInFlightPerCPU * runtime.GOMAXPROCS(0)
	}
	return &inFlightLimit{slots: make(chan struct{}, max), waitRoom: waitingPerSlot * int64(max), wait: maxQueueWait}
}

// acquire takes a slot, waiting up to l.wait while fewer than l.waitRoom
// others wait. It returns "" with a slot, else why the review is shed.
func (l *inFlightLimit) acquire(ctx context.Context) string {
	select {
	case l.slots <- struct{}{}:
		return ""
	default:
	}
	if l.waiting.Add(1) > l.waitRoom {
		l.waiting.Add(-1)
		return fmt.Sprintf("%d more already wait for one", l.waitRoom)
	}
	defer l.waiting.Add(-1)
	timer := time.NewTimer(l.wait)
	defer timer.Stop()
	select {
	case l.slots <- struct{}{}:
		return ""
	case <-timer.C:
		return fmt.Sprintf("none came free within %s", l.wait)
	case <-ctx.Done():
		return "the request ended while it waited for one"
	}
}

func (l *inFlightLimit) release() { <-l.slots }

// inFlight is how many reviews hold a slot now.
func (l *inFlightLimit) inFlight() int { return len(l.slots) }

// wrap sheds what next cannot take: 429 with the limit named, and
// Retry-After.
func (l *inFlightLimit) wrap(next http.Handler) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := l.acquire(r.Context()); why != "" {
			w.Header().Set("Retry-After", "1")
			writeError(w, &httpError{code: http.StatusTooManyRequests, reason: fmt.Sprintf(
				"admission server overloaded, review shed: all %d review slots are busy (charter serve --max-in-flight) and %s; retry later",
				cap(l.slots), why)})
			return
		}
		defer l.release()
		next.ServeHTTP(w, r)
	})
}
