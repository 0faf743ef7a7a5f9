package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/trace"
	"sync"
	"time"
)

// processStart is when this process started, near enough: stall notes
// give times from it, as GODEBUG=gctrace=1 does ("gc 12 @3.456s"), so a
// stall can be laid beside the collections around it.
var processStart = time.Now()

// stallTracer keeps a flight recorder of the Go execution trace over the
// measured rounds and, when a request takes longer than the threshold,
// writes the last second or two of it (the stall and what led to it) to
// dir/stall-<rate>-<webhook>-<n>.trace, for `go tool trace`. At most
// perTarget traces per webhook and rate, and none within a second of the
// last one (one stall delays many requests).
type stallTracer struct {
	dir       string
	threshold time.Duration
	perTarget int

	mu      sync.Mutex
	fr      *trace.FlightRecorder
	rate    string
	written map[string]int // per webhook, at this rate
	writing bool
	last    time.Time
	wg      sync.WaitGroup
}

func newStallTracer(dir string, threshold time.Duration) *stallTracer {
	if threshold <= 0 {
		return nil
	}
	return &stallTracer{dir: dir, threshold: threshold, perTarget: 3}
}

// start begins recording for one rate's measured rounds.
func (s *stallTracer) start(rate string) error {
	if s == nil {
		return nil
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("stall traces: %w", err)
	}
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 2 * time.Second, MaxBytes: 64 << 20})
	if err := fr.Start(); err != nil {
		return fmt.Errorf("stall traces: %w", err)
	}
	s.mu.Lock()
	s.fr, s.rate, s.written = fr, rate, map[string]int{}
	s.mu.Unlock()
	return nil
}

// stop waits for traces being written and stops recording.
func (s *stallTracer) stop() {
	if s == nil {
		return
	}
	s.wg.Wait()
	s.mu.Lock()
	fr := s.fr
	s.fr = nil
	s.mu.Unlock()
	if fr != nil {
		fr.Stop()
	}
}

// answered is the load generator's hook for the requests to webhook: a
// latency over the threshold has the recent trace written, off the
// worker's goroutine.
func (s *stallTracer) answered(webhook string) func(i int, due time.Time, latency time.Duration) {
	if s == nil {
		return nil
	}
	return func(i int, due time.Time, latency time.Duration) {
		if latency < s.threshold {
			return
		}
		s.mu.Lock()
		if s.fr == nil || s.writing || s.written[webhook] >= s.perTarget || time.Since(s.last) < time.Second {
			s.mu.Unlock()
			return
		}
		s.writing = true
		s.written[webhook]++
		n, rate, fr := s.written[webhook], s.rate, s.fr
		s.mu.Unlock()
		s.wg.Go(func() {
			// Let the requests delayed with this one finish, so the
			// trace shows the stall end.
			time.Sleep(100 * time.Millisecond)
			path := filepath.Join(s.dir, fmt.Sprintf("stall-%s-%s-%d.trace", rate, webhook, n))
			err := writeTrace(fr, path)
			s.mu.Lock()
			s.writing, s.last = false, time.Now()
			s.mu.Unlock()
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s/s %s: stall trace: %v\n", rate, webhook, err)
				return
			}
			fmt.Fprintf(os.Stderr, "%s/s %s: request %d took %s, due @%.3fs after start: go tool trace %s\n",
				rate, webhook, i, latency.Round(time.Microsecond), due.Sub(processStart).Seconds(), path)
		})
	}
}

func writeTrace(fr *trace.FlightRecorder, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := fr.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
