package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// stopCPUProfile, once a profile is running, flushes and closes it (main
// calls it after the command, whether or not the command failed).
var stopCPUProfile = func() {}

// startCPUProfile starts a CPU profile of the rest of the command into the
// file --cpuprofile names, if any. It is what `make bench-cli PROFILE=DIR` (hack/conformance
// -cpuprofile) uses to see where a `charter test` run spends its time;
// package initialisation is over by then (GODEBUG=inittrace=1 shows it).
func startCPUProfile(cpuProfile string) error {
	if cpuProfile == "" {
		return nil
	}
	f, err := os.Create(cpuProfile)
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	stopCPUProfile = func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "Error: --cpuprofile:", err)
		}
		stopCPUProfile = func() {}
	}
	return nil
}
