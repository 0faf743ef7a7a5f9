// Package testcases runs the table-driven tests of the engine's packages
// over their testdata files, with what those tests share (the verdicts of
// cleanup tables, a fake API server); tests only.
package testcases

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/engine/loader"
)

// Each runs run as a subtest, named after the file, for every
// testdata/<dir>/*.yaml file decoded strictly into a T; no file at all
// fails the test.
func Each[T any](t *testing.T, dir string, run func(t *testing.T, tc *T)) {
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

// Deletion names a cleanup decision as testdata writes it: "error" when
// err is set (the object is kept), else "delete" or "keep".
func Deletion(selected bool, err error) string {
	switch {
	case err != nil:
		return "error"
	case selected:
		return "delete"
	}
	return "keep"
}

// APIPaths answers apiCall context entries (a loader.APICaller) by their
// urlPath; a path it lacks is an error, as the API server's not found.
type APIPaths map[string]any

// Call answers c.
func (f APIPaths) Call(_ context.Context, c loader.APICall) (any, error) {
	v, ok := f[c.URLPath]
	if !ok {
		return nil, fmt.Errorf("the server could not find the requested resource")
	}
	return v, nil
}
