// Package reliability carries the figures of `make test-reliability`
// (hack/reliability) from the tests that measure them to the table it
// prints: a test reports a Figure, which it logs on a line of its own and
// fails on when the target is missed, and the driver, running the tests
// with go test -json, reads the figures back from the output.
package reliability

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// Figure is one row of the table: what was measured, the figure, the
// target it is held to, and whether it met it.
type Figure struct {
	Part   string `json:"part"`
	Figure string `json:"figure"`
	Target string `json:"target"`
	OK     bool   `json:"ok"`
}

// marker starts the line a figure is logged on.
const marker = "reliability-figure: "

// Report logs f for the driver and fails t when f missed its target: a
// figure is a test verdict, not only a number.
func Report(t testing.TB, f Figure) {
	t.Helper()
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(marker + string(data))
	if !f.OK {
		t.Errorf("%s: %s, target %s", f.Part, f.Figure, f.Target)
	}
}

// Print writes f on a line of its own, for tests that have no testing.TB
// to log with (Ginkgo specs): they print to standard output, which go test
// passes on, and fail on a missed target themselves.
func Print(w io.Writer, f Figure) {
	data, err := json.Marshal(f)
	if err != nil {
		panic(err) // a struct of strings and a bool always marshals
	}
	fmt.Fprintln(w, marker+string(data))
}

// Parse reads a figure from a line of test output, as Report logged it.
func Parse(line string) (Figure, bool) {
	i := strings.Index(line, marker)
	if i < 0 {
		return Figure{}, false
	}
	var f Figure
	if err := json.Unmarshal([]byte(strings.TrimSpace(line[i+len(marker):])), &f); err != nil || f.Part == "" {
		return Figure{}, false
	}
	return f, true
}

// MeasureEnv is set by make test-reliability (hack/reliability) for the
// tests it runs.
const MeasureEnv = "CHARTER_RELIABILITY"

// Measure skips t unless make test-reliability runs it: a test that
// measures the machine (its capacity, latency under load) belongs to the
// reliability table, where the mode and the machine's load are printed
// with its figures, not to make test, whose verdicts must not depend on
// what else the machine runs.
func Measure(t testing.TB) {
	t.Helper()
	if os.Getenv(MeasureEnv) == "" {
		t.Skipf("measures this machine: make test-reliability runs it (%s=1)", MeasureEnv)
	}
}

// ModeEnv is the mode make test-reliability runs in, short or full, set
// for the tests it runs: a fault test does the real thing in the full
// mode and a cheap version of it (a restart, a kill, at a lower rate) in
// the short one, which CI runs.
const ModeEnv = "CHARTER_RELIABILITY_MODE"

// Full reports whether make test-reliability runs in its full mode.
func Full() bool { return os.Getenv(ModeEnv) == "full" }
