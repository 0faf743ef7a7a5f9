package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// Garbage collector settings of `charter serve`.
//
// The admission server allocates a few tens of KiB per review (the decoded
// AdmissionReview, the engine's view of it, the answer) and keeps almost
// none of it, over a live heap that is mostly informer caches. With Go's
// default GOGC=100 a collection starts every time the heap doubles: at
// 1000 reviews/s that is several times a second, and on a 2-core node
// each one takes a core for its dedicated mark worker and makes the
// requests that allocate meanwhile assist. Those pauses and assists are
// what show at the latency tail (issue #5: p99 within 1.5x of a null
// webhook). A larger GOGC collects several times less often for a heap
// several times the live one; the soft memory limit keeps that trade
// inside the container: near the limit the collector runs as often as
// it needs to, whatever GOGC says.
const (
	// serveGCPercent is GOGC for serve unless $GOGC or --gc-percent says
	// otherwise.
	serveGCPercent = 400
	// memoryLimitShare is the share of the container's memory limit given
	// to the Go heap as its soft limit; the rest is for the runtime's own
	// overhead, goroutine stacks and what the kernel counts besides.
	memoryLimitShare = 0.85
)

// cgroupMemoryLimitFiles are where the container's memory limit is read,
// cgroup v2 first. Variables so tests point them at testdata.
var cgroupMemoryLimitFiles = []string{
	"/sys/fs/cgroup/memory.max",
	"/sys/fs/cgroup/memory/memory.limit_in_bytes",
}

// gcSettings are the collector settings serve applies.
type gcSettings struct {
	// percent is the GOGC to set when setPercent; otherwise the
	// runtime's (from $GOGC) stays.
	percent    int
	setPercent bool
	// memoryLimit is the soft limit in bytes to set; 0 means leave the
	// runtime's (from $GOMEMLIMIT, or none) as it is.
	memoryLimit int64
	// why says where the settings come from, for the log.
	why string
}

// serveGCSettings decides the collector settings: an explicit
// --gc-percent wins, then $GOGC, then serveGCPercent when the admission
// server runs in this process. Without it (reports or gitsync alone)
// Go's default stays: their allocations come in bursts (a scan, a sync)
// with no latency tail to protect, and memory is what they are judged
// by, so a heap five times the live one would buy nothing. The soft memory
// limit is $GOMEMLIMIT when set, else memoryLimitShare of the cgroup's
// memory limit when there is one.
func serveGCSettings(flagPercent int, flagSet, admission bool, getenv func(string) string, cgroupLimit func() (int64, bool)) gcSettings {
	var s gcSettings
	var why []string
	switch {
	case flagSet:
		s.percent, s.setPercent = flagPercent, true
		why = append(why, fmt.Sprintf("GOGC=%d from --gc-percent", flagPercent))
	case getenv("GOGC") != "":
		why = append(why, "GOGC="+getenv("GOGC")+" from the environment")
	case admission:
		s.percent, s.setPercent = serveGCPercent, true
		why = append(why, fmt.Sprintf("GOGC=%d (serve's default with admission)", serveGCPercent))
	default:
		why = append(why, "GOGC=100 (Go's default: no admission server in this process)")
	}
	switch limit, ok := cgroupLimit(); {
	case getenv("GOMEMLIMIT") != "":
		why = append(why, "GOMEMLIMIT="+getenv("GOMEMLIMIT")+" from the environment")
	case ok:
		s.memoryLimit = int64(float64(limit) * memoryLimitShare)
		why = append(why, fmt.Sprintf("GOMEMLIMIT=%d (%.0f%% of the cgroup's memory limit %d)", s.memoryLimit, memoryLimitShare*100, limit))
	default:
		why = append(why, "no memory limit")
	}
	s.why = strings.Join(why, ", ")
	return s
}

// apply sets the collector's target and soft limit.
func (s gcSettings) apply() {
	if s.setPercent {
		debug.SetGCPercent(s.percent)
	}
	if s.memoryLimit > 0 {
		debug.SetMemoryLimit(s.memoryLimit)
	}
}

// cgroupMemoryLimit reads the container's memory limit from the first of
// cgroupMemoryLimitFiles that exists. It reports false when there is no
// limit: no file, "max" (cgroup v2), or cgroup v1's "unlimited", which is
// a huge number near the largest int64 rounded to pages.
func cgroupMemoryLimit() (int64, bool) {
	for _, path := range cgroupMemoryLimitFiles {
		data, err := os.ReadFile(filepath.Clean(path))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, false
		}
		return parseMemoryLimit(string(data))
	}
	return 0, false
}

// unlimitedMemory is where a cgroup v1 limit stops meaning anything: 2^62
// bytes; the kernel writes 2^63-1 rounded down to the page size.
const unlimitedMemory = int64(1) << 62

func parseMemoryLimit(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= unlimitedMemory {
		return 0, false
	}
	return n, true
}
