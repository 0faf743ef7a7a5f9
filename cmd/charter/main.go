// Command charter is the single charter binary: the policy engine's CLI
// (test, apply) and every in-cluster component (serve).
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	err := newRootCommand().Execute()
	stopCPUProfile()
	if err != nil {
		// An exitError means the command has already reported what went
		// wrong (failed tests, an Enforce violation); only the code is left.
		var ee exitError
		if !errors.As(err, &ee) {
			fmt.Fprintln(os.Stderr, "Error:", err)
		}
		os.Exit(exitCode(err))
	}
}
