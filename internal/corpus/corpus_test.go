package corpus

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// recorder is a T that records how Require stopped instead of stopping.
type recorder struct{ fatal, skip, log string }

func (r *recorder) Helper()                   {}
func (r *recorder) Fatalf(f string, a ...any) { r.fatal = fmt.Sprintf(f, a...) }
func (r *recorder) Skipf(f string, a ...any)  { r.skip = fmt.Sprintf(f, a...) }
func (r *recorder) Logf(f string, a ...any)   { r.log = fmt.Sprintf(f, a...) }
func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRequire: the corpus is found at ../shared/conformance from the
// repository root, from any folder below it; without it a test fails
// under CI=true and is skipped elsewhere.
func TestRequire(t *testing.T) {
	parent := t.TempDir()
	repo := filepath.Join(parent, "repo")
	writeFile(t, filepath.Join(repo, "go.mod"))
	writeFile(t, filepath.Join(repo, "engine", "x", "x.go"))
	t.Chdir(filepath.Join(repo, "engine", "x"))

	t.Setenv("CI", "true")
	var r recorder
	Require(&r)
	if r.fatal == "" || r.skip != "" {
		t.Fatalf("CI=true without corpus: fatal %q, skip %q", r.fatal, r.skip)
	}
	t.Setenv("CI", "")
	r = recorder{}
	Require(&r)
	if r.skip == "" || r.fatal != "" {
		t.Fatalf("locally without corpus: fatal %q, skip %q", r.fatal, r.skip)
	}
	r = recorder{}
	if _, ok := Optional(&r); ok || r.log == "" {
		t.Fatalf("Optional without corpus: ok %v, log %q", ok, r.log)
	}

	writeFile(t, filepath.Join(parent, "shared", "conformance", "suites", "validate.txt"))
	t.Setenv("CI", "true")
	r = recorder{}
	got := Require(&r)
	if want := filepath.Join(parent, "shared", "conformance"); got != want || r.fatal != "" {
		t.Fatalf("Require = %q (fatal %q), want %q", got, r.fatal, want)
	}
	lists, err := Lists(got)
	if err != nil || len(lists) != 1 || lists[0] != "validate" {
		t.Fatalf("Lists = %v, %v", lists, err)
	}
}
