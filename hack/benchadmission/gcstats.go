package main

import (
	"fmt"
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
	totalCPU   float64 // seconds
	allocs     uint64  // heap objects allocated
	allocBytes uint64
}

var gcSamples = []string{"/gc/cycles/total:gc-cycles", "/cpu/classes/gc/total:cpu-seconds", "/cpu/classes/total:cpu-seconds",
	"/gc/heap/allocs:objects", "/gc/heap/allocs:bytes"}

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
	return gcUsage{cycles: count(0), gcCPU: value(1), totalCPU: value(2), allocs: count(3), allocBytes: count(4)}
}

func (u gcUsage) since(before gcUsage) gcUsage {
	return gcUsage{cycles: u.cycles - before.cycles, gcCPU: u.gcCPU - before.gcCPU, totalCPU: u.totalCPU - before.totalCPU,
		allocs: u.allocs - before.allocs, allocBytes: u.allocBytes - before.allocBytes}
}

func (u gcUsage) add(v gcUsage) gcUsage {
	return gcUsage{cycles: u.cycles + v.cycles, gcCPU: u.gcCPU + v.gcCPU, totalCPU: u.totalCPU + v.totalCPU,
		allocs: u.allocs + v.allocs, allocBytes: u.allocBytes + v.allocBytes}
}

// perRequest is e.g. "412 objects, 38.1 KiB per review".
func (u gcUsage) perRequest(requests int) string {
	if requests == 0 {
		return "no reviews"
	}
	return fmt.Sprintf("%d objects, %.1f KiB per review", u.allocs/uint64(requests), float64(u.allocBytes)/float64(requests)/1024)
}

// String is e.g. "41 cycles, 6% of the process's CPU".
func (u gcUsage) String() string {
	share := 0.0
	if u.totalCPU > 0 {
		share = 100 * u.gcCPU / u.totalCPU
	}
	return fmt.Sprintf("%d cycles, %.0f%% of the process's CPU", u.cycles, share)
}
