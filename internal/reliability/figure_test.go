package reliability

import (
	"strings"
	"testing"
)

func TestParseReadsWhatReportLogged(t *testing.T) {
	want := Figure{Part: "bad input: AdmissionReview", Figure: "12/12 refused, state unchanged", Target: "all", OK: true}
	rec := &recorder{TB: t}
	Report(rec, want)
	if len(rec.logs) != 1 {
		t.Fatalf("logged %d lines, want 1", len(rec.logs))
	}
	// go test prints a log line after the file and line of the call.
	got, ok := Parse("    figure_test.go:9: " + rec.logs[0] + "\n")
	if !ok || got != want {
		t.Fatalf("Parse = %+v, %v; want %+v", got, ok, want)
	}
	for _, line := range []string{"", "=== RUN   TestX", "reliability-figure: {", "reliability-figure: {}"} {
		if f, ok := Parse(line); ok {
			t.Errorf("Parse(%q) = %+v, want nothing", line, f)
		}
	}
}

func TestParseReadsWhatPrintWrote(t *testing.T) {
	want := Figure{Part: "fault: charter absent", Figure: "7/7 writes admitted", Target: "all", OK: true}
	var b strings.Builder
	Print(&b, want)
	if got, ok := Parse(b.String()); !ok || got != want {
		t.Fatalf("Parse(%q) = %+v, %v; want %+v", b.String(), got, ok, want)
	}
}

func TestReportFailsAMissedTarget(t *testing.T) {
	rec := &recorder{TB: t}
	Report(rec, Figure{Part: "p", Figure: "1 crash", Target: "0 crashes"})
	if !rec.failed {
		t.Fatal("a missed target did not fail the test")
	}
}

// recorder keeps what a test logs and whether it failed.
type recorder struct {
	testing.TB
	logs   []string
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Log(args ...any)       { r.logs = append(r.logs, args[0].(string)) }
func (r *recorder) Errorf(string, ...any) { r.failed = true }
