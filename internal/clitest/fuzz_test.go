package clitest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charter-dev/charter/internal/clitest/manifest"
)

// fuzzTestFile is the name every fuzzed test file is read under.
const fuzzTestFile = "policies/x/kyverno-test.yaml"

// FuzzDecodeTest reads arbitrary text as a kyverno-test.yaml, as LoadFile
// does: splitting it into documents, then decoding each strictly as a
// cli.kyverno.io Test. It must never panic, and every error must name the
// file, so `charter test` always says which suite is broken.
func FuzzDecodeTest(f *testing.F) {
	files, err := Discover([]string{"testdata"}, DefaultFileName)
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"name: old-schema\npolicies: [p.yaml]\nresources: [r.yaml]\n",
		"apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nresults: [{policy: p, result: maybe}]\n",
		"apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nresults: [{policy: p, result: pass, operation: PATCH}]\n",
		"apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nresults: [{policy: p, result: pass}]\nresults: []\n",
		"apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\n---\n- a\n---\n&a [*a]\n",
		"apiVersion: cli.kyverno.io/v1alpha1\nkind: Values\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := manifest.Split(data, fuzzTestFile)
		if err != nil {
			if !strings.Contains(err.Error(), fuzzTestFile) {
				t.Fatalf("a split error that does not name the file: %v", err)
			}
			return
		}
		for _, d := range docs {
			test, err := decodeTest(d)
			switch {
			case err != nil && !strings.Contains(err.Error(), fuzzTestFile):
				t.Fatalf("a decode error that does not name the file: %v", err)
			case err == nil && test == nil:
				t.Fatal("no Test and no error")
			}
		}
	})
}

// FuzzDecodePolicies reads arbitrary text as a policy file given to
// `charter test` or `charter apply`: every kind is decoded strictly into
// its type (ClusterPolicy, Policy, both PolicyException groups, the CEL
// policies and their namespaced variants). It must never panic, and every
// error must name the file.
func FuzzDecodePolicies(f *testing.F) {
	for _, file := range []string{
		filepath.Join("..", "..", "api", "versions", "testdata", "roundtrip.yaml"),
		filepath.Join("..", "..", "reconciler", "gitsync", "check", "testdata", "older-versions.yaml"),
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nspec: {rules: 1}\n"))
	f.Add([]byte("apiVersion: policies.kyverno.io/v1alpha1\nkind: ValidatingPolicy\nspec: {validations: [{expression: 1}]}\n"))
	f.Add([]byte("kind: Policy\n"))
	const source = "policies/x/policy.yaml"
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := manifest.Split(data, source)
		if err != nil {
			return
		}
		if _, err := manifest.DecodePolicies(docs); err != nil && !strings.Contains(err.Error(), source) {
			t.Fatalf("a decode error that does not name the file: %v", err)
		}
	})
}
