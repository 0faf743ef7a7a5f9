package main

import (
	"fmt"
	"math"
	"runtime/metrics"
)

// serveGCPercent mirrors charter serve's default --gc-percent (see
// cmd/charter/serve_gc.go): direct mode runs both servers in this process,
// so this process collects its garbage the way charter serve would.
const serveGCPercent = 400

// gcUsage is how much collecting garbage cost over some time: cycles
// completed, and the CPU the collector used against the process's total.
type gcUsage struct {
	cycles     uint64
	gcCPU      float64 // seconds
	assistCPU  float64 // seconds of it in mark assists, taken from allocating goroutines
	totalCPU   float64 // seconds
	allocs     uint64  // heap objects allocated
	allocBytes uint64
	// pauses counts the stop-the-world pauses of the collector by
	// duration (the runtime's buckets, pauseBuckets).
	pauses []uint64
}

var gcSamples = []string{"/gc/cycles/total:gc-cycles", "/cpu/classes/gc/total:cpu-seconds", "/cpu/classes/total:cpu-seconds",
	"/gc/heap/allocs:objects", "/gc/heap/allocs:bytes", "/cpu/classes/gc/mark/assist:cpu-seconds", "/sched/pauses/total/gc:seconds"}

// pauseBuckets are the bucket bounds of /sched/pauses/total/gc:seconds.
var pauseBuckets []float64

// sampleGC reads the runtime's running totals. The CPU figures are the
// runtime's estimates, updated at every collection: good enough to compare
// rounds, not to bill by the millisecond.
func sampleGC() gcUsage {
	s := make([]metrics.Sample, len(gcSamples))
	for i, name := range gcSamples {
		s[i].Name = name
	}
	metrics.Read(s)
	value := func(i int) float64 {
		if s[i].Value.Kind() == metrics.KindFloat64 {
			return s[i].Value.Float64()
		}
		return 0
	}
	count := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	u := gcUsage{cycles: count(0), gcCPU: value(1), totalCPU: value(2), allocs: count(3), allocBytes: count(4), assistCPU: value(5)}
	if s[6].Value.Kind() == metrics.KindFloat64Histogram {
		h := s[6].Value.Float64Histogram()
		pauseBuckets = h.Buckets
		u.pauses = append([]uint64(nil), h.Counts...)
	}
	return u
}

func (u gcUsage) since(before gcUsage) gcUsage {
	return gcUsage{cycles: u.cycles - before.cycles, gcCPU: u.gcCPU - before.gcCPU, assistCPU: u.assistCPU - before.assistCPU,
		totalCPU: u.totalCPU - before.totalCPU, allocs: u.allocs - before.allocs, allocBytes: u.allocBytes - before.allocBytes,
		pauses: combine(u.pauses, before.pauses, -1)}
}

func (u gcUsage) add(v gcUsage) gcUsage {
	return gcUsage{cycles: u.cycles + v.cycles, gcCPU: u.gcCPU + v.gcCPU, assistCPU: u.assistCPU + v.assistCPU,
		totalCPU: u.totalCPU + v.totalCPU, allocs: u.allocs + v.allocs, allocBytes: u.allocBytes + v.allocBytes,
		pauses: combine(u.pauses, v.pauses, 1)}
}

// combine adds (sign 1) or subtracts (sign -1) b's counts from a's.
func combine(a, b []uint64, sign int) []uint64 {
	out := make([]uint64, max(len(a), len(b)))
	copy(out, a)
	for i, n := range b {
		if sign < 0 {
			out[i] -= n
		} else {
			out[i] += n
		}
	}
	return out
}

// longestPause is the upper bound of the bucket of the longest
// stop-the-world pause counted, 0 when there was none.
func (u gcUsage) longestPause() float64 {
	for i := len(u.pauses) - 1; i >= 0; i-- {
		if u.pauses[i] > 0 && i+1 < len(pauseBuckets) {
			if hi := pauseBuckets[i+1]; !math.IsInf(hi, 1) {
				return hi
			}
			return pauseBuckets[i]
		}
	}
	return 0
}

// perRequest is e.g. "412 objects, 38.1 KiB per review".
func (u gcUsage) perRequest(requests int) string {
	if requests == 0 {
		return "no reviews"
	}
	return fmt.Sprintf("%d objects, %.1f KiB per review", u.allocs/uint64(requests), float64(u.allocBytes)/float64(requests)/1024)
}

// String is e.g. "41 cycles, 6% of the process's CPU (assists 2%),
// longest stop 0.5 ms": assists are the share taken from goroutines that
// allocate (handlers wait for them), and the stops are the runtime's
// stop-the-world pauses, bucketed (the bound is the bucket's top).
func (u gcUsage) String() string {
	share, assists := 0.0, 0.0
	if u.totalCPU > 0 {
		share, assists = 100*u.gcCPU/u.totalCPU, 100*u.assistCPU/u.totalCPU
	}
	return fmt.Sprintf("%d cycles, %.0f%% of the process's CPU (assists %.1f%%), longest stop %.2g ms", u.cycles, share, assists, u.longestPause()*1000)
}
