// Command charter is the single charter binary: the policy engine's CLI
// (test, apply) and every in-cluster component (serve).
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(exitCode(err))
	}
}
