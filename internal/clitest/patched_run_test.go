package clitest

import (
	"testing"
)

// TestRunMutateAndGenerateSuite checks the patchedResources and
// generatedResource comparisons end to end, with mutate-existing targets,
// an erroring rule, and skipped generate rules.
func TestRunMutateAndGenerateSuite(t *testing.T) {
	results := runPaths(t, "testdata/mutate")
	if len(results) != 1 || results[0].Err != nil {
		t.Fatalf("results: %+v", results)
	}
	want := []short{
		{"team-label", "v1/ConfigMap/ns1/cm", Passed, "Ok"},
		{"team-label", "v1/ConfigMap/ns1/wrong", Failed, ReasonPatchedMismatch},
		{"breaks", "v1/Secret/ns1/broken", Passed, "Ok"},
		{"stamp", "v1/Secret/ns1/sec-a", Passed, "Ok"},
		{"quota", "v1/ResourceQuota/team-a/quota", Passed, "Ok"},
		// Skipped, yet generated (spec §9.4 row 50): the row names the
		// generated object.
		{"prod-extras", "v1/ConfigMap/team-a/extra-a", Passed, "Ok"},
		{"prod-plain", "v1/Namespace/team-a", Passed, "Ok"},
	}
	rows := results[0].Rows
	checkRows(t, rows, want)
}

// TestRunValuesSuite checks a values file end to end: foreachValues stand
// in for a foreach element's imageRegistry entry by element position, and
// request.operation: UPDATE among a resource's values gives the policy an
// UPDATE of the resource onto itself.
func TestRunValuesSuite(t *testing.T) {
	results := runPaths(t, "testdata/values")
	if len(results) != 1 || results[0].Err != nil {
		t.Fatalf("results: %+v", results)
	}
	want := []short{
		{"no-root-images", "v1/Pod/default/one-container", Passed, "Ok"},
		{"no-root-images", "v1/Pod/default/two-containers", Passed, "Ok"},
		{"require-team", "v1/Pod/default/two-containers", Passed, "Ok"},
	}
	rows := results[0].Rows
	checkRows(t, rows, want)
	if msg := rows[1].Message; msg != "validation failure: a container runs as root" {
		t.Errorf("fail message %q", msg)
	}
}

// TestRunGlobalValuesSuite: a values file of kind Value is read like one of
// kind Values, and a globalContextEntries mock with fieldPath and
// projections serves the map of projection names to results, and each
// projection by "<entry>.<projection>", as the cluster does; a
// globalReference name may hold variables.
func TestRunGlobalValuesSuite(t *testing.T) {
	results := runPaths(t, "testdata/globalvalues")
	if len(results) != 1 || results[0].Err != nil {
		t.Fatalf("results: %+v", results)
	}
	rows := results[0].Rows
	checkRows(t, rows, []short{
		{"known-registry", "v1/Pod/default/from-ghcr", Passed, "Ok"},
		{"known-registry", "v1/Pod/default/from-dockerhub", Passed, "Ok"},
		{"team-from-values", "v1/Pod/default/from-ghcr", Passed, "Ok"},
		{"team-from-values", "v1/Pod/default/from-dockerhub", Passed, "Ok"},
		{"projection-by-name", "v1/Pod/default/from-ghcr", Passed, "Ok"},
		{"projection-by-name", "v1/Pod/default/from-dockerhub", Passed, "Ok"},
		{"entry-per-namespace", "v1/Pod/default/from-ghcr", Passed, "Ok"},
		{"entry-per-namespace", "v1/Pod/default/from-dockerhub", Passed, "Ok"},
	})
	if msg := rows[1].Message; msg != "docker.io/library/nginx:1 is not from one of 2 registries" {
		t.Errorf("fail message %q", msg)
	}
}
