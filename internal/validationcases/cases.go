// Package validationcases reads engine/testdata/validation, the policies
// Kyverno refuses (or warns about) when they are written, for the tests of
// each entry point that must refuse them: policy admission, the GitOps
// pre-apply check and the CLI. docs/policy-validation.md lists them.
package validationcases

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Case is one file.
type Case struct {
	// Name is the file's name without .yaml.
	Name string `json:"-"`
	// Field is the path a refusal must name; empty for a warning case.
	Field string `json:"field"`
	// Warning is the warning an admitted policy must be given.
	Warning string `json:"warning"`
	// Cluster marks a check only the cluster makes (cpol.ClusterFaults).
	Cluster bool `json:"cluster"`
	// Discovery marks a check that asks the cluster's discovery
	// (policycheck.KindFaults): policy admission and the GitOps check
	// make it, the CLI does not, as Kyverno's CLI does not.
	Discovery bool `json:"discovery"`
	// Policy is the object.
	Policy map[string]any `json:"policy"`
}

// Kind is the policy's kind.
func (c *Case) Kind() string {
	kind, _ := c.Policy["kind"].(string)
	return kind
}

// Load reads every case; it fails t when there are none.
func Load(t testing.TB) []*Case {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(self), "..", "..", "engine", "testdata", "validation")
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		t.Fatalf("no testdata in %s", dir)
	}
	cases := make([]*Case, 0, len(files))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		c := &Case{Name: strings.TrimSuffix(filepath.Base(file), ".yaml")}
		if err := yaml.Unmarshal(data, c); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		cases = append(cases, c)
	}
	return cases
}
