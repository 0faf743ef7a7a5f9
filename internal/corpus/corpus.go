// Package corpus locates the shared conformance corpus, Kyverno's policy
// library with its kyverno-test.yaml suites, at ../shared/conformance beside
// the repository root, and names the suite lists charter claims to pass.
// Tests and hack/conformance (`make conformance`) use it; charter itself
// never reads the corpus.
package corpus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Claimed names the lists of suites/<name>.txt that charter claims: every
// expected result in them must pass, and `make conformance` fails when one
// does not. A list joins when its support lands end to end.
var Claimed = []string{"validate", "mutate", "generate", "cel", "vpol", "gpol", "mpol"}

// IsClaimed reports whether a list (its name without .txt) is claimed.
func IsClaimed(list string) bool { return slices.Contains(Claimed, list) }

// Dir returns the corpus directory: ../shared/conformance from the
// repository root, the nearest directory above the working directory that
// holds go.mod. It is an error when the corpus is not there.
func Dir() (string, error) {
	root, err := repositoryRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(filepath.Dir(root), "shared", "conformance")
	if _, err := os.Stat(filepath.Join(dir, "suites")); err != nil {
		return dir, fmt.Errorf("no conformance corpus at %s: %w", dir, err)
	}
	return dir, nil
}

// Lists returns the names of the corpus's suite lists (suites/*.txt), in
// name order.
func Lists(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "suites", "*.txt"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no suite lists in %s", filepath.Join(dir, "suites"))
	}
	var out []string
	for _, f := range files {
		out = append(out, strings.TrimSuffix(filepath.Base(f), ".txt"))
	}
	slices.Sort(out)
	return out, nil
}

// Suites returns the suite folders a list names, as paths under dir.
func Suites(dir, list string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "suites", list+".txt"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Fields(string(data)) {
		out = append(out, filepath.Join(dir, line))
	}
	return out, nil
}

// T is the part of testing.TB that Require needs.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Skipf(format string, args ...any)
}

// Require returns the corpus directory for a test or stops it: with
// CI=true a missing corpus fails the test, as CI must never pass by
// skipping what it was meant to check; elsewhere the test is skipped with
// the reason.
func Require(t T) string {
	t.Helper()
	dir, err := Dir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: the corpus is required)", err)
			return ""
		}
		t.Skipf("%v; skipping (with CI=true this fails)", err)
		return ""
	}
	return dir
}

// Optional is Require for a test that has other cases to run: without the
// corpus it logs the reason and reports false instead of skipping (and
// still fails with CI=true).
func Optional(t T) (string, bool) {
	t.Helper()
	dir, err := Dir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: the corpus is required)", err)
			return "", false
		}
		t.Logf("%v; its cases are not run (with CI=true this fails)", err)
		return "", false
	}
	return dir, true
}

func repositoryRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
