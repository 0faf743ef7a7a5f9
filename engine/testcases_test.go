package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// eachCase runs run as a subtest, named after the file, for every
// testdata/<dir>/*.yaml file decoded strictly into a T; no file at all
// fails the test.
func eachCase[T any](t *testing.T, dir string, run func(t *testing.T, tc *T)) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.yaml"))
	if len(files) == 0 {
		t.Fatalf("no testdata in testdata/%s", dir)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var tc T
			if err := yaml.UnmarshalStrict(data, &tc); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			run(t, &tc)
		})
	}
}
