package engine

import (
	"runtime"
	"sync"
	"weak"
)

// weakCache holds compiled values still in use, by source: the CLI
// compiles the same policy into several sets, and the cluster compiles a
// policy again for each process's set. Entries go when nothing holds the
// value any more, so neither a long run of edits in the cluster nor a CLI
// run over many suites keeps every policy ever compiled.
type weakCache[T any] struct {
	m sync.Map // string → weak.Pointer[T]
}

// get returns the value compiled from key before, or compiles it. Only a
// value compiled without faults (ok) is kept: a faulty one must report its
// faults each time it is compiled.
func (c *weakCache[T]) get(key string, compile func() (v *T, ok bool)) *T {
	if wp, found := c.m.Load(key); found {
		if v := wp.(weak.Pointer[T]).Value(); v != nil {
			return v
		}
	}
	v, ok := compile()
	if v != nil && ok {
		wp := weak.Make(v)
		c.m.Store(key, wp)
		runtime.AddCleanup(v, func(key string) { c.m.CompareAndDelete(key, wp) }, key)
	}
	return v
}
