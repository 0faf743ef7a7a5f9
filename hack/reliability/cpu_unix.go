//go:build unix

package main

import (
	"syscall"
	"time"
)

// childrenCPU is the user and system CPU time of every process this one
// started and waited for, and of theirs that they waited for.
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
