// Command benchrun runs a command and reports its wall time and peak
// resident memory (getrusage of the child), plus its CPU time, for the Makefile's bench targets
// on machines without /usr/bin/time -v.
//
//	go run ./hack/benchrun [-runs N] [-tail N] -- COMMAND [ARG...]
//
// The command's stdout is dropped except its last -tail lines; its stderr
// passes through. With -runs N the command runs N times and the fastest run
// is reported with the largest peak RSS. benchrun exits with the command's
// exit code.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

func main() {
	runs := flag.Int("runs", 1, "run the command this many times; report the fastest")
	tail := flag.Int("tail", 1, "print the last N lines of the command's stdout")
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: benchrun [-runs N] [-tail N] -- COMMAND [ARG...]")
		os.Exit(2)
	}
	var (
		best    time.Duration
		maxRSS  int64
		bestCPU time.Duration
		code    int
		lastOut []byte
	)
	for i := range *runs {
		var out bytes.Buffer
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = &out, os.Stderr
		start := time.Now()
		err := cmd.Run()
		elapsed := time.Since(start)
		if cmd.ProcessState == nil {
			fmt.Fprintln(os.Stderr, "benchrun:", err)
			os.Exit(2)
		}
		code = cmd.ProcessState.ExitCode()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			maxRSS = max(maxRSS, ru.Maxrss) // KiB on Linux
		}
		cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if i == 0 || elapsed < best {
			best = elapsed
		}
		if i == 0 || cpu < bestCPU {
			bestCPU = cpu
		}
		lastOut = out.Bytes()
	}
	lines := strings.Split(strings.TrimRight(string(lastOut), "\n"), "\n")
	for _, l := range lines[max(0, len(lines)-*tail):] {
		fmt.Println(l)
	}
	fmt.Printf("wall: %.3fs  cpu: %.3fs (best of %d)  max RSS: %.1f MiB  exit: %d\n",
		best.Seconds(), bestCPU.Seconds(), *runs, float64(maxRSS)/1024, code)
	os.Exit(code)
}
