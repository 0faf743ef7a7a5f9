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
	cycles   uint64
	gcCPU    float64 // seconds
	totalCPU float64 // seconds
}

var gcSamples = []string{"/gc/cycles/total:gc-cycles", "/cpu/classes/gc/total:cpu-seconds", "/cpu/classes/total:cpu-seconds"}

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
	var u gcUsage
	if s[0].Value.Kind() == metrics.KindUint64 {
		u.cycles = s[0].Value.Uint64()
	}
	u.gcCPU, u.totalCPU = value(1), value(2)
	return u
}

func (u gcUsage) since(before gcUsage) gcUsage {
	return gcUsage{cycles: u.cycles - before.cycles, gcCPU: u.gcCPU - before.gcCPU, totalCPU: u.totalCPU - before.totalCPU}
}

func (u gcUsage) add(v gcUsage) gcUsage {
	return gcUsage{cycles: u.cycles + v.cycles, gcCPU: u.gcCPU + v.gcCPU, totalCPU: u.totalCPU + v.totalCPU}
}

// String is e.g. "41 cycles, 6% of the process's CPU".
func (u gcUsage) String() string {
	share := 0.0
	if u.totalCPU > 0 {
		share = 100 * u.gcCPU / u.totalCPU
	}
	return fmt.Sprintf("%d cycles, %.0f%% of the process's CPU", u.cycles, share)
}
