package main

import (
	"os"
	"strings"
	"testing"
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
