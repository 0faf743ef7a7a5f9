package benchmem

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time this process has used, user and system. On a
// loaded machine it says what work cost where wall time says how long the
// process waited for a core.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
