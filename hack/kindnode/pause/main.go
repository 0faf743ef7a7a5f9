// Command pause is the process of a Pod's sandbox container in the offline
// kind node image: it holds the Pod's namespaces open, reaps the orphans
// re-parented to it (it is PID 1 when the Pod shares its PID namespace) and
// exits cleanly on SIGINT or SIGTERM, as the runtime expects when it stops
// the sandbox.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (charter kind node image)")
		return
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child so that none stays a zombie.
func reap() {
	for {
		pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
