package clitest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDiscover(t *testing.T) {
	files, err := Discover([]string{"testdata/run", "testdata/run/good/.kyverno-test/kyverno-test.yaml"}, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"testdata/run/broken/kyverno-test.yaml",
		"testdata/run/good/.kyverno-test/kyverno-test.yaml",
	}
	if !slices.Equal(files, want) {
		t.Errorf("got %v, want %v (dot-directories walked, each file once, lexical order)", files, want)
	}
	if files, _ := Discover([]string{"testdata/run"}, "other-name.yaml"); len(files) != 0 {
		t.Errorf("--file-name other-name.yaml found %v", files)
	}
	if _, err := Discover([]string{"testdata/nope"}, ""); err == nil {
		t.Error("a missing path must be an error")
	}
}

func TestLoadFile(t *testing.T) {
	tests := []struct {
		dir string
		// wantErrs holds, per document, "" for a good suite or substrings
		// the error must contain.
		wantErrs [][]string
		check    func(t *testing.T, s []*Suite)
	}{
		{
			dir:      "unknown-field",
			wantErrs: [][]string{{"testdata/loader/unknown-field/kyverno-test.yaml", "results[1].reslt: unknown field"}},
		},
		{
			dir:      "case-insensitive",
			wantErrs: [][]string{nil},
			check: func(t *testing.T, s []*Suite) {
				test := s[0].Test
				if !slices.Equal(test.Policies, []string{"policy.yaml"}) || test.Results[0].Rule != "check-app" {
					t.Errorf("keys in other cases not decoded: %+v", test)
				}
			},
		},
		{
			dir:      "no-apiversion",
			wantErrs: [][]string{{"no-apiversion/kyverno-test.yaml", "apiVersion: required"}},
		},
		{
			dir: "multi-doc",
			wantErrs: [][]string{
				nil,
				{"multi-doc/kyverno-test.yaml (document 3)", "results[0].unknownKey: unknown field"},
			},
			check: func(t *testing.T, s []*Suite) {
				if s[0].Test.Metadata.Name != "first" || s[0].Name() != filepath.Join("testdata/loader/multi-doc", "kyverno-test.yaml") {
					t.Errorf("first suite: name %q, metadata.name %q", s[0].Name(), s[0].Test.Metadata.Name)
				}
			},
		},
		{
			dir:      "bad-result",
			wantErrs: [][]string{{"results[1].result", `unknown result "Passed"`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			suites := LoadFile(filepath.Join("testdata/loader", tt.dir, DefaultFileName))
			if len(suites) != len(tt.wantErrs) {
				t.Fatalf("got %d suites, want %d", len(suites), len(tt.wantErrs))
			}
			for i, s := range suites {
				want := tt.wantErrs[i]
				switch {
				case want == nil && s.Err != nil:
					t.Errorf("suite %d: unexpected error %v", i, s.Err)
				case want != nil && s.Err == nil:
					t.Errorf("suite %d: no error, want one containing %q", i, want)
				case want != nil:
					for _, w := range want {
						if !strings.Contains(s.Err.Error(), w) {
							t.Errorf("suite %d: error %q does not contain %q", i, s.Err, w)
						}
					}
				}
			}
			if tt.check != nil {
				tt.check(t, suites)
			}
		})
	}
}

func TestLoadInputsNamesTheFieldAndFile(t *testing.T) {
	suites := LoadFile("testdata/loader/bad-values/kyverno-test.yaml")
	if suites[0].Err != nil {
		t.Fatal(suites[0].Err)
	}
	_, err := loadInputs(suites[0], newFileCache())
	if err == nil {
		t.Fatal("want an error")
	}
	for _, w := range []string{"policies[0]", "policy.yaml"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func TestDecodeValuesIsStrict(t *testing.T) {
	_, err := decodeValuesFile("testdata/loader/bad-values/values.yaml")
	if err == nil {
		t.Fatal("want an error")
	}
	for _, w := range []string{"bad-values/values.yaml", "policies[0].rules[0].valuess: unknown field"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}
