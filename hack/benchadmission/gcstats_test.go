package main

import (
	"math"
	"runtime"
	"strings"
	"testing"
)

// TestGCUsageOverAnInterval: since and add keep the pause counts of the
// interval, and the longest pause is the top of the highest bucket that
// counted one.
func TestGCUsageOverAnInterval(t *testing.T) {
	saved := pauseBuckets
	t.Cleanup(func() { pauseBuckets = saved })
	pauseBuckets = []float64{0, 1e-4, 1e-3, 1e-2, math.Inf(1)}
	before := gcUsage{cycles: 3, pauses: []uint64{5, 2, 0, 0}}
	after := gcUsage{cycles: 7, pauses: []uint64{9, 2, 1, 0}}
	d := after.since(before)
	if d.cycles != 4 || d.longestPause() != 1e-2 {
		t.Errorf("since: %d cycles, longest %v; want 4 and 0.01", d.cycles, d.longestPause())
	}
	if got := d.add(gcUsage{pauses: []uint64{0, 0, 0, 1}}).longestPause(); got != 1e-2 {
		t.Errorf("a pause in the last, open bucket reads %v, want its lower bound 0.01", got)
	}
	if (gcUsage{}).longestPause() != 0 {
		t.Error("no pause counted must read 0")
	}
	// The runtime's own figures: a collection stops the world at least once.
	start := sampleGC()
	runtime.GC()
	u := sampleGC().since(start)
	if u.cycles == 0 || u.longestPause() <= 0 || !strings.Contains(u.String(), "longest stop") {
		t.Errorf("after runtime.GC: %+v (%s)", u, u)
	}
}
