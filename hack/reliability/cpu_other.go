//go:build !unix

package main

import "time"

// childrenCPU is not measured where there is no getrusage.
func childrenCPU() time.Duration { return 0 }
