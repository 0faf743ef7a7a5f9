package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestEveryFuzzTargetIsListed: a fuzz function added anywhere in the
// repository is fuzzed by make test-reliability, and every listed one
// exists.
func TestEveryFuzzTargetIsListed(t *testing.T) {
	root := filepath.Join("..", "..")
	found := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Fuzz") {
				rel, err := filepath.Rel(root, filepath.Dir(p))
				if err != nil {
					return err
				}
				found["./"+filepath.ToSlash(rel)+" "+fn.Name.Name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, ft := range fuzzTargets {
		listed[ft.pkg+" "+ft.name] = true
	}
	var missing, gone []string
	for k := range found {
		if !listed[k] {
			missing = append(missing, k)
		}
	}
	for k := range listed {
		if !found[k] {
			gone = append(gone, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(gone)
	if len(missing) > 0 || len(gone) > 0 {
		t.Fatalf("fuzzTargets is out of date: not listed %v; listed but not found %v", missing, gone)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestOnlyParts(t *testing.T) {
	p, err := fullPlan(time.Second).only("^soak")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pt := range p.parts {
		names = append(names, pt.name)
	}
	if want := []string{"soak", "soak through the API server, every kind"}; !slices.Equal(names, want) || p.seeds || len(p.fuzz) > 0 {
		t.Errorf("-parts ^soak: parts %q, seeds %t, %d fuzz targets; want %q alone", names, p.seeds, len(p.fuzz), want)
	}
	if _, err := shortPlan().only("^soak"); err == nil || !strings.Contains(err.Error(), `"bad input: admission; fault: charter absent"`) {
		t.Errorf("-parts ^soak in the short mode: %v, want an error naming the mode's parts", err)
	}
}

// TestBinaryNamesAreUnique: go test -c -o dir/ names each test binary
// after its package's last element, so two packages of one name in the
// lists would overwrite each other's binary.
func TestBinaryNamesAreUnique(t *testing.T) {
	byName := map[string]string{}
	for _, pkg := range fullPlan(time.Second).packages() {
		name := binaryName(pkg)
		if other, ok := byName[name]; ok {
			t.Errorf("%s and %s both build %s", other, pkg, name)
		}
		byName[name] = pkg
	}
}

// TestShortModeRunsEachTestApart: the short mode runs its seeds, its
// fuzzing and each test of its parts as a job of its own, at once; the
// full mode each part whole, one after another.
func TestShortModeRunsEachTestApart(t *testing.T) {
	short := shortPlan()
	tests := 0
	for _, pt := range short.parts {
		tests += len(pt.tests)
	}
	if got, want := len(short.jobs(testBinaries{})), 1+len(short.fuzz)+tests; !short.parallel || got != want {
		t.Errorf("short mode: %d jobs, parallel %t; want %d (seeds, %d fuzz targets, %d tests), parallel", got, short.parallel, want, len(short.fuzz), tests)
	}
	full := fullPlan(time.Second)
	if got, want := len(full.jobs(testBinaries{})), 1+len(full.fuzz)+len(full.parts); full.parallel || got != want {
		t.Errorf("full mode: %d jobs, parallel %t; want %d, one at a time", got, full.parallel, want)
	}
}
