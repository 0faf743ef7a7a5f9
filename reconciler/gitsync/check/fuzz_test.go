package check

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

// fuzzFile is the repository file every fuzzed object is declared in.
const fuzzFile = "repo/fuzz.yaml"

// FuzzObjects feeds arbitrary manifests to the check a revision passes
// before it is applied: strict decoding of every kind charter knows (every
// served version of ClusterPolicy, Policy, the CEL kinds and their
// namespaced variants, both PolicyException groups, the cleanup kinds,
// GlobalContextEntry) and policycheck.Object, which compiles each as it
// runs. It must never panic, and every fault must name the file and the
// object it is about, so a refused revision always says where.
func FuzzObjects(f *testing.F) {
	for _, file := range []string{
		filepath.Join("..", "..", "..", "api", "versions", "testdata", "roundtrip.yaml"),
		filepath.Join("testdata", "valid.yaml"),
		filepath.Join("testdata", "older-versions.yaml"),
		filepath.Join("testdata", "bad-vpol.yaml"),
		filepath.Join("testdata", "bad-mpol.yaml"),
		filepath.Join("testdata", "namespaced-calls.yaml"),
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		// Each document alone too: the fuzzer mutates a small input
		// faster than the whole file.
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			f.Add(doc)
		}
	}
	scheme := testScheme()
	f.Fuzz(func(t *testing.T, data []byte) {
		var objs []build.Object
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			var m map[string]any
			if yaml.Unmarshal(doc, &m) != nil || m == nil {
				continue
			}
			objs = append(objs, build.Object{Unstructured: &unstructured.Unstructured{Object: m}, File: fuzzFile})
		}
		err := Objects(objs, scheme)
		if err == nil {
			return
		}
		cerr, ok := err.(*Error)
		if !ok {
			t.Fatalf("Objects returned %T, not *check.Error: %v", err, err)
		}
		if len(cerr.Faults) == 0 {
			t.Fatalf("an error without faults: %v", err)
		}
		for _, fault := range cerr.Faults {
			if fault.File != fuzzFile || fault.Object == "" || strings.TrimSpace(fault.Message) == "" {
				t.Fatalf("a fault that does not say where or what: %+v", fault)
			}
		}
	})
}
