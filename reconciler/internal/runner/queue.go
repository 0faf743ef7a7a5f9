// Package runner is the one way charter's controllers process work: a
// named queue drained by workers under one retry policy, with the
// workqueue_* metrics controller-runtime gives its own controllers, and
// the Lease a leader-only controller runs under.
//
// The controllers keep their own loops around it (leadership terms,
// discovery, policy snapshots); what they share is how an item is taken,
// retried, given up on and measured.
package runner

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	// controller-runtime's workqueue metrics provider: importing its
	// priority queue installs it as client-go's (workqueue.SetProvider),
	// so every named queue reports workqueue_depth, workqueue_adds_total,
	// workqueue_retries_total, … labelled name and controller, into the
	// registry charter serve exposes.
	_ "sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// The retry policy: a failed item waits BaseDelay, doubled per failure up
// to its queue's MaxDelay; overall, retries are held to RetryQPS with a
// burst of RetryBurst. These are controller-runtime's defaults
// (workqueue.DefaultTypedControllerRateLimiter), which only lets
// MaxDelay be chosen per queue.
const (
	BaseDelay       = 5 * time.Millisecond
	DefaultMaxDelay = 1000 * time.Second
	RetryQPS        = 10
	RetryBurst      = 100
)

// Options configure a Queue.
type Options[T comparable] struct {
	// Name names the queue in the workqueue_* metrics (labels name and
	// controller).
	Name string
	// Workers process items at once; at least one.
	Workers int
	// MaxDelay caps an item's backoff; DefaultMaxDelay when zero.
	MaxDelay time.Duration
	// MaxRetries, when positive, bounds the retries of one item: after
	// that many failed retries GiveUp is called and the item is dropped
	// until it is added again. Zero retries until the item succeeds.
	MaxRetries int
	// GiveUp learns of an item dropped after MaxRetries.
	GiveUp func(item T, err error)
}

// Handler processes one item. An error retries the item with backoff
// (unless ctx has ended); a positive requeueAfter without an error looks
// at the item again after that long.
type Handler[T comparable] func(ctx context.Context, item T) (requeueAfter time.Duration, err error)

// Queue is a named, rate-limited work queue and its workers.
type Queue[T comparable] struct {
	o Options[T]
	q workqueue.TypedRateLimitingInterface[T]
}

// New returns a Queue; items may be added before Run.
func New[T comparable](o Options[T]) *Queue[T] {
	if o.Workers < 1 {
		o.Workers = 1
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = DefaultMaxDelay
	}
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[T](min(BaseDelay, o.MaxDelay), o.MaxDelay),
		&workqueue.TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(rate.Limit(RetryQPS), RetryBurst)},
	)
	return &Queue[T]{o: o, q: workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
		workqueue.TypedRateLimitingQueueConfig[T]{Name: o.Name})}
}

// Add queues an item now.
func (q *Queue[T]) Add(item T) { q.q.Add(item) }

// AddAfter queues an item once d has passed.
func (q *Queue[T]) AddAfter(item T, d time.Duration) { q.q.AddAfter(item, d) }

// Retries is how often the item has been retried since it last
// succeeded.
func (q *Queue[T]) Retries(item T) int { return q.q.NumRequeues(item) }

// ShutDown stops the queue: workers finish the items they hold, the rest
// are dropped, and adds are ignored.
func (q *Queue[T]) ShutDown() { q.q.ShutDown() }

// Run processes items with Options.Workers workers until ctx ends, then
// shuts the queue down and returns once every worker has.
func (q *Queue[T]) Run(ctx context.Context, handle Handler[T]) {
	var wg sync.WaitGroup
	for range q.o.Workers {
		wg.Go(func() {
			for q.next(ctx, handle) {
			}
		})
	}
	<-ctx.Done()
	q.q.ShutDown()
	wg.Wait()
}

// next processes one item; false means the queue shut down.
func (q *Queue[T]) next(ctx context.Context, handle Handler[T]) bool {
	item, quit := q.q.Get()
	if quit {
		return false
	}
	defer q.q.Done(item)
	after, err := handle(ctx, item)
	switch {
	case ctx.Err() != nil:
		// Shutting down: the next leader or start does it again.
		q.q.Forget(item)
	case err != nil && q.o.MaxRetries > 0 && q.q.NumRequeues(item) >= q.o.MaxRetries:
		q.q.Forget(item)
		if q.o.GiveUp != nil {
			q.o.GiveUp(item, err)
		}
	case err != nil:
		q.q.AddRateLimited(item)
	case after > 0:
		q.q.Forget(item)
		q.q.AddAfter(item, after)
	default:
		q.q.Forget(item)
	}
	return true
}
