package events

import (
	"container/list"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Defaults of the spam filter, client-go's (tools/record
// EventSourceObjectSpamFilter): per object, a burst of 25 new events, then
// one every 5 minutes, over the 4096 objects seen last.
const (
	DefaultSpamBurst    = 25
	DefaultSpamInterval = 5 * time.Minute
	maxSpamObjects      = 4096
)

// spamFilter bounds the events created about one object, as client-go's
// recorder does for every controller: a policy that fails for every Pod of
// a busy cluster gets its first 25 events at once, then one per interval,
// instead of one API write per violation. Repeats counted in a series are
// not events created and are not limited here.
type spamFilter struct {
	burst    float64
	interval time.Duration

	mu      sync.Mutex
	buckets map[spamKey]*list.Element
	lru     *list.List // of *spamBucket, most recently seen first
}

// spamKey is the object an event is about, and the event's type, as
// client-go's default spam key.
type spamKey struct {
	ref       corev1.ObjectReference
	eventType string
}

type spamBucket struct {
	key    spamKey
	tokens float64
	last   time.Time
}

func newSpamFilter(burst int, interval time.Duration) *spamFilter {
	return &spamFilter{burst: float64(burst), interval: interval, buckets: map[spamKey]*list.Element{}, lru: list.New()}
}

// allow takes a token from the bucket of e's object, refilled at one per
// interval up to the burst.
func (f *spamFilter) allow(e *Event, now time.Time) bool {
	key := spamKey{ref: e.Regarding, eventType: e.Type()}
	f.mu.Lock()
	defer f.mu.Unlock()
	el, ok := f.buckets[key]
	if !ok {
		if f.lru.Len() >= maxSpamObjects {
			oldest := f.lru.Back()
			delete(f.buckets, oldest.Value.(*spamBucket).key)
			f.lru.Remove(oldest)
		}
		el = f.lru.PushFront(&spamBucket{key: key, tokens: f.burst, last: now})
		f.buckets[key] = el
	}
	f.lru.MoveToFront(el)
	b := el.Value.(*spamBucket)
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(f.burst, b.tokens+float64(elapsed)/float64(f.interval))
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
