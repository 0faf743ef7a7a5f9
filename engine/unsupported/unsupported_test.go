package unsupported

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

type unsupportedCase struct {
	Name   string          `json:"name"`
	Object json.RawMessage `json:"object"`
	Want   []string        `json:"want"`
}

// decodePolicyObject decodes a policy of any kind Features
// knows, strictly.
func decodePolicyObject(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	var meta struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	var obj any
	switch meta.Kind {
	case "ClusterPolicy":
		obj = &kyvernov1.ClusterPolicy{}
	case "Policy":
		obj = &kyvernov1.Policy{}
	case "ClusterCleanupPolicy":
		obj = &kyvernov2.ClusterCleanupPolicy{}
	case "CleanupPolicy":
		obj = &kyvernov2.CleanupPolicy{}
	default:
		t.Fatalf("unknown kind %q", meta.Kind)
	}
	if err := yaml.UnmarshalStrict(raw, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func describeFinding(u *Finding) string {
	where := map[Where]string{InCluster: "cluster", InCLI: "cli", Everywhere: "everywhere"}[u.Where]
	action := "audit"
	if u.Enforce {
		action = "enforce"
	}
	return fmt.Sprintf("%s %s %s: %s", where, action, u.Field, u.Feature)
}

func loadUnsupportedCases(t *testing.T) []unsupportedCase {
	data, err := os.ReadFile("testdata/policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []unsupportedCase `json:"cases"`
	}
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		t.Fatal(err)
	}
	return file.Cases
}

// TestUnsupportedFeatures runs the unsupported-feature table over the
// policies of testdata: each finding names the field where the
// feature is used, where charter cannot run it, and whether its rule
// enforces.
func TestUnsupportedFeatures(t *testing.T) {
	for _, tc := range loadUnsupportedCases(t) {
		t.Run(tc.Name, func(t *testing.T) {
			var got []string
			for _, u := range Features(decodePolicyObject(t, tc.Object)) {
				got = append(got, describeFinding(u))
			}
			slices.Sort(got)
			want := slices.Clone(tc.Want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("findings:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

// TestUnsupportedTableCovered checks that every entry of the table is
// found by some case above, so an entry that stops matching (a renamed
// field, a broken pattern) cannot go unnoticed.
func TestUnsupportedTableCovered(t *testing.T) {
	found := map[string]bool{}
	for _, tc := range loadUnsupportedCases(t) {
		for _, u := range Features(decodePolicyObject(t, tc.Object)) {
			found[u.Feature] = true
		}
	}
	for _, f := range unsupportedFeatures {
		if !found[f.name] {
			t.Errorf("no case in testdata uses %q (%s)", f.name, f.path)
		}
	}
}
