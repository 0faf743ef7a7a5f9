package clitest

import "testing"

// TestConformanceMutatingPolicies runs every MutatingPolicy suite of the
// corpus (suites/mpol.txt) through `charter test` and wants every row to
// pass (patchedResources compared): mpol is a claimed list.
func TestConformanceMutatingPolicies(t *testing.T) {
	_, c := runPassingList(t, "mpol.txt")
	if c.Passed != 55 {
		t.Errorf("%d rows passed, want the 55 Kyverno's CLI counts", c.Passed)
	}
}
