package benchmem

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"sync"
	"time"
)

// ProcessMemory is a child process's resident memory split by what backs
// it, in KiB, as /proc/PID/status reports it. Anon is heap, stacks and
// written data; File is pages of mapped files (for a Go program, mostly
// its own binary's text and read-only data), RssShmem included, as a
// binary run from tmpfs is mapped from shared memory.
type ProcessMemory struct {
	Anon, File int64
}

// Total is Anon + File.
func (m ProcessMemory) Total() int64 { return m.Anon + m.File }

// ReadProcessMemory reads a running process's resident memory.
func ReadProcessMemory(pid int) (ProcessMemory, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ProcessMemory{}, err
	}
	return parseStatus(data), nil
}

func parseStatus(data []byte) ProcessMemory {
	var m ProcessMemory
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, rest, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		var into *int64
		switch string(key) {
		case "RssAnon":
			into = &m.Anon
		case "RssFile", "RssShmem":
			into = &m.File
		default:
			continue
		}
		v, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))), 10, 64)
		if err == nil {
			*into += v
		}
	}
	return m
}

// SampleProcess reads pid's memory every interval until stop is called,
// and stop returns the sample of the largest total. The kernel keeps only
// the peak total (VmHWM, rusage's Maxrss), not its split: a sampled split
// can miss a peak shorter than the interval, so read the split next to
// Maxrss, not instead of it.
func SampleProcess(pid int, every time.Duration) (stop func() ProcessMemory) {
	var (
		mu   sync.Mutex
		peak ProcessMemory
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if m, err := ReadProcessMemory(pid); err == nil {
				mu.Lock()
				if m.Total() > peak.Total() {
					peak = m
				}
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() ProcessMemory {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}
