package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/charter-dev/charter/internal/benchmem"
)

// TestReportFailsOnlyOnClaimedLists: a failing, skipping or unrunnable
// claimed list fails the report; an unclaimed list never does.
func TestReportFailsOnlyOnClaimedLists(t *testing.T) {
	good := run{list: "validate", summary: true, passed: 10}
	for _, tc := range []struct {
		name string
		runs []run
		ok   bool
		want string
	}{
		{"all claimed pass", []run{good}, true, "ok"},
		{"unclaimed lists are reported only", []run{good, {list: "ivpol", summary: true, skipped: 5, exit: 1}}, true, "reported only"},
		{"claimed row failed", []run{{list: "validate", summary: true, passed: 9, failed: 1, exit: 1}}, false, "FAIL (1 failed)"},
		{"claimed row skipped", []run{{list: "mutate", summary: true, passed: 9, skipped: 1}}, false, "FAIL (1 skipped)"},
		{"claimed suite could not run", []run{{list: "cel", summary: true, passed: 9, unrunnable: 1, exit: 1}}, false, "FAIL (1 test files could not run)"},
		{"no summary", []run{{list: "generate", exit: 2}}, false, "FAIL (no summary line)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.CreateTemp(t.TempDir(), "report")
			if err != nil {
				t.Fatal(err)
			}
			ok := report(f, tc.runs)
			out, _ := os.ReadFile(f.Name())
			if ok != tc.ok || !strings.Contains(string(out), tc.want) {
				t.Errorf("report = %v, want %v with %q:\n%s", ok, tc.ok, tc.want, out)
			}
		})
	}
}

// TestMedianOfRuns: each figure is the median of the runs', and one
// failing run fails the list however the others went.
func TestMedianOfRuns(t *testing.T) {
	clean := func(wall time.Duration, rss, anon int64) run {
		return run{list: "validate", summary: true, passed: 10, wall: wall, rssKiB: rss, split: benchmem.ProcessMemory{Anon: anon, File: 60000}}
	}
	m := median([]run{clean(3*time.Second, 900, 90), clean(time.Second, 100, 10), clean(2*time.Second, 500, 50)})
	if m.wall != 2*time.Second || m.rssKiB != 500 || m.split.Anon != 50 || m.split.File != 60000 || !m.clean() {
		t.Errorf("median = %+v, want wall 2s, rss 500, anon 50, file 60000, clean", m)
	}
	bad := clean(time.Second, 100, 10)
	bad.failed, bad.exit = 1, 1
	if m := median([]run{clean(time.Second, 100, 10), bad, clean(time.Second, 100, 10)}); m.clean() {
		t.Errorf("median of runs with a failing one is clean: %+v", m)
	}
}

// TestCompareWithBaseline: with a baseline, each figure of charter is
// printed over the baseline's, as a ratio.
func TestCompareWithBaseline(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "compare")
	if err != nil {
		t.Fatal(err)
	}
	base := run{list: "validate", wall: 400 * time.Millisecond, cpu: 600 * time.Millisecond, rssKiB: 80 * 1024}
	now := run{list: "validate", wall: 100 * time.Millisecond, cpu: 300 * time.Millisecond, rssKiB: 60 * 1024}
	compare(f, []run{base}, []run{now})
	out, _ := os.ReadFile(f.Name())
	for _, want := range []string{"0.400 -> 0.100s (0.25x)", "0.600 -> 0.300s (0.50x)", "80.0 -> 60.0 MiB (0.75x)", "0.0 -> 0.0 MiB (-)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("compare output lacks %q:\n%s", want, out)
		}
	}
}
