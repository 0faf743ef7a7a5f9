package clitest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/charter-dev/charter/internal/clitest/manifest"
)

// Suite is one Test document found on disk, or the reason it could not be
// read. A broken suite is reported on its own; the others still run.
type Suite struct {
	// File is the test file; Dir its directory, the base of relative paths.
	File string
	Dir  string
	// Index is the document's position in the file (several Tests may
	// share one file).
	Index int
	Test  *Test
	// Err is why the document could not be loaded; Test is nil then.
	Err error
}

// Name is what output calls the suite: the file, plus the document number
// when the file holds several.
func (s *Suite) Name() string {
	return manifest.Document{Source: s.File, Index: s.Index}.Where()
}

// Discover returns the test files under paths, in order: a directory is
// walked recursively, dot-directories such as .kyverno-test included, and
// every file named fileName is taken, in lexical order; a path naming a file
// is taken as is. Each file is returned once.
func Discover(paths []string, fileName string) ([]string, error) {
	if fileName == "" {
		fileName = DefaultFileName
	}
	var files []string
	seen := map[string]bool{}
	add := func(p string) {
		if clean := filepath.Clean(p); !seen[clean] {
			seen[clean] = true
			files = append(files, clean)
		}
	}
	for _, root := range paths {
		info, err := os.Stat(root)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			add(root)
			continue
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == ".git" && p != root {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Name() == fileName {
				add(p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// LoadFile reads every Test document of a test file. A file that cannot be
// read or split gives one broken Suite; a document that does not decode gives
// a broken Suite for that document only.
func LoadFile(file string) []*Suite {
	dir := filepath.Dir(file)
	docs, err := manifest.ReadFile(file)
	if err != nil {
		return []*Suite{{File: file, Dir: dir, Err: err}}
	}
	if len(docs) == 0 {
		return []*Suite{{File: file, Dir: dir, Err: fmt.Errorf("%s: no Test document", file)}}
	}
	suites := make([]*Suite, 0, len(docs))
	for _, d := range docs {
		s := &Suite{File: file, Dir: dir, Index: d.Index}
		s.Test, s.Err = decodeTest(d)
		suites = append(suites, s)
	}
	return suites
}

func decodeTest(d manifest.Document) (*Test, error) {
	// The schema first: an old-style file fails on it, not on its first
	// unknown field.
	if err := checkDocSchema(d, "Test"); err != nil {
		return nil, err
	}
	var t Test
	if err := decodeStrict(d, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", d.Where(), err)
	}
	for i := range t.Results {
		if err := checkResult(&t.Results[i]); err != nil {
			return nil, fmt.Errorf("%s: results[%d].%w", d.Where(), i, err)
		}
	}
	return &t, nil
}

// checkDocSchema checks a document's apiVersion and kind before it is
// decoded.
func checkDocSchema(d manifest.Document, want string) error {
	apiVersion, kind := d.TypeMeta()
	return checkSchema(d, apiVersion, kind, want)
}

// checkSchema rejects documents without apiVersion and kind: Kyverno's CLI
// refuses the old schema too (it needs `kyverno fix test`).
func checkSchema(d manifest.Document, apiVersion, kind, want string) error {
	switch {
	case apiVersion == "":
		return fmt.Errorf("%s: apiVersion: required (the schema without apiVersion and kind is no longer supported)", d.Where())
	case kind == "":
		return fmt.Errorf("%s: kind: required, want %s", d.Where(), want)
	case kind != want:
		return fmt.Errorf("%s: kind: got %q, want %s", d.Where(), kind, want)
	}
	return nil
}

var validResults = []string{"pass", "fail", "skip", "warn", "error"}

var validOperations = []string{"", "CREATE", "UPDATE", "DELETE"}

func checkResult(r *TestResult) error {
	if r.Policy == "" {
		return &FieldError{Path: "policy", Fault: "required"}
	}
	switch want := r.Expected(); {
	case want == "":
		return &FieldError{Path: "result", Fault: "required"}
	case !slices.Contains(validResults, want):
		return &FieldError{Path: "result", Fault: fmt.Sprintf("unknown result %q, want one of pass, fail, skip, warn, error", want)}
	}
	if !slices.Contains(validOperations, r.Operation) {
		return &FieldError{Path: "operation", Fault: fmt.Sprintf("unknown operation %q, want CREATE, UPDATE or DELETE", r.Operation)}
	}
	return nil
}
