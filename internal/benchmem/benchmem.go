// Package benchmem samples this process's memory (and CPU) for the make
// bench-* programs that run a controller in process.
package benchmem

import (
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// GoMemory is the memory the Go runtime holds from the OS (mapped minus
// released), which is what the process's RSS follows.
func GoMemory() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}

// HeapInUse is the memory held by live and not yet swept heap objects.
func HeapInUse() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Peak records the highest GoMemory and HeapInUse seen while it runs.
type Peak struct{ Total, Heap atomic.Uint64 }

// Run samples every interval until stop is called.
func (p *Peak) Run(every time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if v := GoMemory(); v > p.Total.Load() {
				p.Total.Store(v)
			}
			if v := HeapInUse(); v > p.Heap.Load() {
				p.Heap.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// MiB converts bytes to mebibytes.
func MiB(b uint64) float64 { return float64(b) / (1 << 20) }
