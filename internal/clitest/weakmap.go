package clitest

import (
	"runtime"
	"sync"
	"weak"
)

// weakMap hands out one value per key while anything holds it: the
// suites of a run that share a policy or resource file share what was
// decoded or compiled from it while they run, and what no suite holds any
// more is collected instead of staying in the cache until the run ends
// (over a large library the cache held every suite's policies).
type weakMap[T any] struct {
	mu sync.Mutex
	m  map[string]weak.Pointer[T]
}

// get returns the value of key that is still held somewhere, or a new
// zero value stored under key.
func (w *weakMap[T]) get(key string) *T {
	w.mu.Lock()
	defer w.mu.Unlock()
	if v := w.m[key].Value(); v != nil {
		return v
	}
	if w.m == nil {
		w.m = map[string]weak.Pointer[T]{}
	}
	v := new(T)
	wp := weak.Make(v)
	w.m[key] = wp
	runtime.AddCleanup(v, w.forget, weakKey[T]{key, wp})
	return v
}

type weakKey[T any] struct {
	key string
	wp  weak.Pointer[T]
}

// forget drops a collected value's key, unless it holds a newer value.
func (w *weakMap[T]) forget(k weakKey[T]) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m[k.key] == k.wp {
		delete(w.m, k.key)
	}
}

// len is the number of keys whose values may still be held.
func (w *weakMap[T]) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m)
}
