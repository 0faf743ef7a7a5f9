package clitest

import (
	"context"
	"testing"
)

// TestConformanceGeneratingPolicies runs every GeneratingPolicy suite of
// the corpus (suites/gpol.txt) through `charter test` and wants every row
// to pass: each generated object equal to the suite's generatedResource.
func TestConformanceGeneratingPolicies(t *testing.T) {
	results, err := NewRunner(Options{}).Run(context.Background(), conformanceList(t, "gpol.txt"))
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
	t.Logf("gpol.txt: %d suites, %+v", len(results), c)
	if len(results) != 2 || c.Passed != 2 || c.Failed != 0 {
		t.Errorf("%d suites, %+v: want 2 suites with 2 rows passed", len(results), c)
	}
}
