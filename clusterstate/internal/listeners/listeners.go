// Package listeners keeps the callbacks a cache calls on a change, each
// removable again: a controller that runs only while its replica leads
// (reports) subscribes at each term of leadership and must leave nothing
// behind when the term ends, or every lost Lease would keep a stopped
// controller, and all it knew, reachable from the cache.
package listeners

import "sync"

// Set is a set of listeners, called in the order they were added. The zero
// value is empty and ready; it is safe for concurrent use.
type Set[F any] struct {
	mu      sync.Mutex
	entries []*entry[F]
}

type entry[F any] struct{ fn F }

// Add adds fn and returns what removes it again (any number of times).
func (s *Set[F]) Add(fn F) (remove func()) {
	e := &entry[F]{fn: fn}
	s.mu.Lock()
	s.entries = append(s.entries, e)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, x := range s.entries {
			if x == e {
				// A new slice: a caller of All may still range over
				// the old one.
				s.entries = append(s.entries[:i:i], s.entries[i+1:]...)
				return
			}
		}
	}
}

// All returns the listeners now in the set, to call outside any lock.
func (s *Set[F]) All() []F {
	s.mu.Lock()
	defer s.mu.Unlock()
	fns := make([]F, len(s.entries))
	for i, e := range s.entries {
		fns[i] = e.fn
	}
	return fns
}
