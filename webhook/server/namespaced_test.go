package server

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/charter-dev/charter/clusterstate/policycache"
)

// TestNamespacedPathsSeeTheirNamespaceOnly: a namespaced policy is served
// on its failure policy's namespaced path, for requests of its namespace
// only, and never on the shared paths, whose webhooks select every
// namespace; the cluster-wide policies are never served on a namespaced
// path. The bare path sees them all.
func TestNamespacedPathsSeeTheirNamespaceOnly(t *testing.T) {
	snapshot, err := policycache.Build(loadPolicies(t, "testdata/namespaced-policies.yaml"), nil)
	if err != nil || len(snapshot.Errors) > 0 {
		t.Fatalf("test policies do not compile: %v %v", err, snapshot.Errors)
	}
	h := NewHandler(Options{Policies: staticSnapshots{snapshot}})
	labelled := func(namespace, label string) pod {
		p := compliant()
		p.namespace, p.labels = namespace, map[string]string{label: "true"}
		return p
	}
	for _, tc := range []struct {
		path string
		pod  pod
		// deniedBy is the message of the denial; "" for admitted.
		deniedBy string
	}{
		{PathValidateFail + NamespacedSegment, labelled("team-a", "tenant-deny"), "team-a denies it"},
		{PathValidateFail, labelled("team-a", "tenant-deny"), ""},
		{PathValidateIgnore, labelled("team-a", "tenant-deny"), ""},
		{PathValidateFail + NamespacedSegment, labelled("team-b", "tenant-deny"), ""},
		{PathValidateFail + NamespacedSegment, labelled("team-a", "tenant-open-deny"), ""},
		{PathValidateIgnore + NamespacedSegment, labelled("team-a", "tenant-open-deny"), "team-a denies it too"},
		{PathValidateIgnore + NamespacedSegment, labelled("team-a", "tenant-deny"), ""},
		{PathValidateFail + NamespacedSegment, labelled("team-a", "platform-deny"), ""},
		{PathValidateFail, labelled("team-a", "platform-deny"), "the platform denies it"},
		{PathValidate, labelled("team-a", "tenant-deny"), "team-a denies it"},
		{PathValidate, labelled("team-a", "platform-deny"), "the platform denies it"},
		{PathValidate, labelled("team-b", "tenant-deny"), ""},
	} {
		name := tc.path + " " + tc.pod.namespace + " " + strings.Join(slices.Sorted(maps.Keys(tc.pod.labels)), ",")
		t.Run(name, func(t *testing.T) {
			resp := decision(t, h, tc.path, tc.pod.review())
			if resp.Allowed != (tc.deniedBy == "") {
				t.Fatalf("Allowed = %v, want %v (result %+v)", resp.Allowed, tc.deniedBy == "", resp.Result)
			}
			if tc.deniedBy != "" && !strings.Contains(resp.Result.Message, tc.deniedBy) {
				t.Errorf("message %q, want it to say %q", resp.Result.Message, tc.deniedBy)
			}
		})
	}
}
