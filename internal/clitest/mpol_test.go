package clitest

import (
	"context"
	"testing"
)

// TestConformanceMutatingPolicies runs every MutatingPolicy suite of the
// corpus (suites/mpol.txt) through `charter test` and wants every row to
// pass (patchedResources compared): mpol is a claimed list.
func TestConformanceMutatingPolicies(t *testing.T) {
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
			if row.Verdict != Passed || row.Reason != ReasonOK {
				t.Errorf("%s #%d %s %s: %s, %s (%s)", row.Suite, row.ID, row.Policy, row.Resource, row.Verdict, row.Reason, row.Message)
			}
		}
	}
	t.Logf("mpol.txt: %d suites, %+v", len(results), c)
	if c.Passed < 55 {
		t.Errorf("%d rows passed, want at least 55", c.Passed)
	}
}
