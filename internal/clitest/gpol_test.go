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
