package clitest

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// mpolPending are the mpol.txt suites that fail for a reason outside the
// MutatingPolicy engine, with that reason: the test wants each of their
// rows to fail with it, so the entry goes when the reason does.
var mpolPending = map[string]string{}

// TestConformanceMutatingPolicies runs every MutatingPolicy suite of the
// corpus (suites/mpol.txt) through `charter test` and wants every row to
// pass (patchedResources compared), but those of mpolPending, which must
// fail for the reason given there.
func TestConformanceMutatingPolicies(t *testing.T) {
	dir := conformanceDir(t)
	results, err := NewRunner(Options{}).Run(context.Background(), conformanceList(t, "mpol.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var c Counts
	for _, r := range results {
		if r.Err != nil {
			t.Errorf("%v", r.Err)
			continue
		}
		c.Add(r.Rows)
		for _, row := range r.Rows {
			rel, _ := filepath.Rel(dir, row.Suite)
			suite := strings.TrimPrefix(filepath.Dir(filepath.Dir(rel)), "kyverno-policies/")
			if reason, pending := mpolPending[suite]; pending {
				if row.Verdict == Passed || !strings.Contains(row.Reason, reason) {
					t.Errorf("%s #%d: pending for %q, but got %s, %s: drop it from mpolPending if it passes", suite, row.ID, reason, row.Verdict, row.Reason)
				}
				continue
			}
			if row.Verdict != Passed || row.Reason != ReasonOK {
				t.Errorf("%s #%d %s %s: %s, %s (%s)", row.Suite, row.ID, row.Policy, row.Resource, row.Verdict, row.Reason, row.Message)
			}
		}
	}
	t.Logf("mpol.txt: %d suites, %+v", len(results), c)
	if c.Passed < 51 {
		t.Errorf("%d rows passed, want at least 51", c.Passed)
	}
}
