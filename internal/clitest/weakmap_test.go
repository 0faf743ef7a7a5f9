package clitest

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// collected runs the collector until n() is 0 (cleanups run after a
// collection, on their own goroutine) or gives up after a while.
func collected(n func() int) bool {
	for range 100 {
		runtime.GC()
		if n() == 0 {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// TestWeakMapSharesWhileHeld: a key gives the same value while it is held
// and a fresh one once it was collected, and the key goes with it.
func TestWeakMapSharesWhileHeld(t *testing.T) {
	var m weakMap[cacheEntry]
	held := m.get("a")
	held.value = "decoded"
	if again := m.get("a"); again != held {
		t.Fatalf("get while held returned another value")
	}
	runtime.KeepAlive(held)
	held = nil
	if !collected(m.len) {
		t.Fatalf("%d keys still in the map after their values were dropped", m.len())
	}
	if fresh := m.get("a"); fresh.value != nil {
		t.Errorf("get after collection returned the old value %v", fresh.value)
	}
}

// TestRunnerKeepsNothingOnceDone: after a run, neither the decoded files
// nor the compiled policy sets of its suites stay cached in the Runner.
func TestRunnerKeepsNothingOnceDone(t *testing.T) {
	r := NewRunner(Options{})
	results, err := r.Run(context.Background(), []string{"testdata/run"})
	if err != nil || len(results) != 2 || results[1].Err != nil || len(results[1].Rows) == 0 {
		t.Fatalf("run: %v, %d suites", err, len(results))
	}
	if !collected(r.sets.len) {
		t.Errorf("%d compiled policy sets still cached after the run", r.sets.len())
	}
	if !collected(r.files.entries.len) {
		t.Errorf("%d decoded files still cached after the run", r.files.entries.len())
	}
}
