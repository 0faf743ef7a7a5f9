package clitest

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// kyvernoRowTally counts the rows `kyverno test` prints for a suite's
// expected results, the way its printTestResult picks them, written apart
// from judge so that the two can check each other: every results[] entry
// gives one row per loaded resource that one of its resources (name or
// namespace/name) or resourceSpecs names, or, when they name none, one row
// per loaded resource. Kind is never used. The CLI sets namespace
// "default" on every resource that has none, cluster-scoped ones too.
//
// It is the count for policies answering with one rule response per
// resource, as every CEL policy kind does; a ClusterPolicy's autogen rules
// add rows it does not count.
func kyvernoRowTally(t *Test, resources []*unstructured.Unstructured) int {
	namespace := func(o *unstructured.Unstructured) string {
		if ns := o.GetNamespace(); ns != "" {
			return ns
		}
		return "default"
	}
	rows := 0
	for _, exp := range t.Results {
		names := exp.Resources
		if exp.Resource != "" {
			names = append(append([]string(nil), names...), exp.Resource)
		}
		matched := 0
		for _, o := range resources {
			for _, name := range names {
				ns, n, qualified := strings.Cut(name, "/")
				if (qualified && ns == namespace(o) && n == o.GetName()) || (!qualified && name == o.GetName()) {
					matched++
				}
			}
			for _, spec := range exp.ResourceSpecs {
				group, version, grouped := strings.Cut(o.GetAPIVersion(), "/")
				if !grouped {
					group, version = "", group
				}
				if spec.Group == group && spec.Version == version && spec.Namespace == namespace(o) && spec.Name == o.GetName() {
					matched++
				}
			}
		}
		if matched == 0 {
			matched = len(resources)
		}
		rows += matched
	}
	return rows
}

func TestKyvernoRowTally(t *testing.T) {
	pod := func(ns, name string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("v1")
		o.SetKind("Pod")
		o.SetNamespace(ns)
		o.SetName(name)
		return o
	}
	object := func(apiVersion, kind, ns, name string) *unstructured.Unstructured {
		o := pod(ns, name)
		o.SetAPIVersion(apiVersion)
		o.SetKind(kind)
		return o
	}
	resources := []*unstructured.Unstructured{
		pod("default", "a"),
		pod("team", "a"),
		object("apps/v1", "Deployment", "default", "a"),
		object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "r"),
		object("rbac.authorization.k8s.io/v1", "Role", "default", "r"),
		pod("default", "b"),
	}
	tests := []struct {
		name    string
		results []TestResult
		want    int
	}{
		{"a name picks every resource of that name, whatever its kind or namespace", []TestResult{{Kind: "Pod", Resources: []string{"a"}}}, 3},
		{"namespace/name picks that namespace only", []TestResult{{Resources: []string{"team/a"}}}, 1},
		{"a cluster-scoped resource is in namespace default for the CLI", []TestResult{{Resources: []string{"default/r"}}}, 2},
		{"several names add up", []TestResult{{Resources: []string{"a", "b"}}, {Resources: []string{"r"}}}, 6},
		{"a name nothing has checks every resource", []TestResult{{Resources: []string{"missing"}}}, 6},
		{"no resources check every resource", []TestResult{{Policy: "p"}}, 6},
		{"the deprecated resource field counts", []TestResult{{Resource: "b"}}, 1},
		{"resourceSpecs match group, version, namespace and name", []TestResult{{ResourceSpecs: []ResourceSpec{{Group: "apps", Version: "v1", Namespace: "default", Name: "a"}}}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := kyvernoRowTally(&Test{Results: tt.results}, resources); got != tt.want {
				t.Errorf("got %d rows, want %d", got, tt.want)
			}
		})
	}
}

// rowTally compares, suite by suite, the rows `charter test` judged with
// the rows kyvernoRowTally counts from the suite's files, reporting each
// suite where they differ (an expected result charter did not run and
// check, or checked twice). It returns the tally's total.
func rowTally(t *testing.T, results []*SuiteResult) int {
	t.Helper()
	total := 0
	for _, r := range results {
		if r.Err != nil {
			t.Errorf("%v", r.Err)
			continue
		}
		in, err := loadInputs(r.Suite, newFileCache())
		if err != nil {
			t.Fatalf("%s: %v", r.Suite.Name(), err)
		}
		want := kyvernoRowTally(r.Suite.Test, in.resources)
		total += want
		if len(r.Rows) != want {
			t.Errorf("%s: charter judged %d rows, the suite's expected results make %d", strings.TrimPrefix(r.Suite.Dir, conformanceDir(t)+string(filepath.Separator)), len(r.Rows), want)
		}
	}
	return total
}
