package clitest

import "testing"

// TestConformanceGeneratingPolicies runs every GeneratingPolicy suite of
// the corpus (suites/gpol.txt) through `charter test` and wants every row
// to pass: each generated object equal to the suite's generatedResource.
func TestConformanceGeneratingPolicies(t *testing.T) {
	results, c := runPassingList(t, "gpol.txt")
	if suites := len(results); suites != 2 || c.Passed != 2 || c.Failed != 0 {
		t.Errorf("%d suites, %+v: want 2 suites with 2 rows passed", len(results), c)
	}
}

// TestGeneratingPolicyTemplate runs a suite whose GeneratingPolicy
// generates from a multi-document template with CEL interpolation: both
// objects must equal the suite's generatedResource documents (one row
// each).
func TestGeneratingPolicyTemplate(t *testing.T) {
	results := runPaths(t, "testdata/gpoltemplate")
	if len(results) != 1 || results[0].Err != nil {
		t.Fatalf("results %+v", results)
	}
	rows := results[0].Rows
	if len(rows) != 2 {
		t.Fatalf("rows %+v, want one per generated object", rows)
	}
	for _, row := range rows {
		if row.Verdict != Passed || row.Reason != ReasonOK {
			t.Errorf("%s: %s, %s (%s)", row.Resource, row.Verdict, row.Reason, row.Message)
		}
	}
}
