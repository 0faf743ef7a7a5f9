package main

import (
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/charter-dev/charter/internal/clitest/manifest"
	"github.com/charter-dev/charter/internal/controlplane"
)

// TestConvertVerifiesThePolicyLibrary: every policy of policies/ converts
// cleanly (add-namespace-labels' apiCall as a resource.Get variable, which
// its suite's values mock as they mock the original's context entry), and
// their own kyverno-test suites give the same verdict (and patched object)
// for every resource on the original and the conversion;
// --check passes; -o DIR writes each policy file's conversion at the same
// relative path, as documents charter decodes as ValidatingPolicies.
func TestConvertVerifiesThePolicyLibrary(t *testing.T) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	lib := []string{filepath.Join(root, "policies")}
	out := t.TempDir()
	stdout, stderr, err := runCharter(t, append([]string{"convert", "--verify", "--check", "-o", out}, lib...)...)
	if err != nil {
		t.Fatalf("convert --check failed: %v\n%s%s", err, stdout, stderr)
	}
	m := regexp.MustCompile(`Converted cleanly: (\d+) of (\d+) policies; verdicts equal: (\d+) of (\d+) verified`).FindStringSubmatch(stdout)
	if m == nil || m[1] != m[2] || m[3] != m[4] || m[1] != m[3] || m[1] == "0" {
		t.Fatalf("want every policy converted and verified, got:\n%s", stdout)
	}
	written := filepath.Join(out, "best-practices", "disallow-latest-tag", "disallow-latest-tag.yaml")
	docs, err := manifest.ReadFile(written)
	if err != nil {
		t.Fatalf("-o %s: %v", out, err)
	}
	pf, err := manifest.DecodePolicies(docs)
	if err != nil || len(pf.Policies) != 1 || pf.Policies[0].GetKind() != "ValidatingPolicy" {
		t.Fatalf("%s: want one ValidatingPolicy, got %v (%v)", written, pf, err)
	}
}

// TestConvertCheckFailsOnWhatDoesNotConvert: --check exits 1 and the table
// names each rule that did not convert with its reason; -o yaml prints
// nothing of that policy without --partial, and its converted rules with
// it.
func TestConvertCheckFailsOnWhatDoesNotConvert(t *testing.T) {
	policy := filepath.Join("..", "..", "internal", "convert", "testdata", "unconvertible", "policy.yaml")
	stdout, _, err := runCharter(t, "convert", "--check", policy)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("want exit 1, got %v\n%s", err, stdout)
	}
	// Two of its three rules convert (the mutate rule and a validate
	// rule); podSecurity does not.
	for _, want := range []string{`rule baseline: validate\.podSecurity`, `mixed\s+3\s+2\s`} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	stdout, stderr, err := runCharter(t, "convert", "-o", "yaml", policy)
	if err != nil || strings.TrimSpace(stdout) != "" || !strings.Contains(stderr, "podSecurity") {
		t.Errorf("without --partial: err %v, stdout %q, stderr %q", err, stdout, stderr)
	}
	stdout, _, err = runCharter(t, "convert", "--partial", "-o", "yaml", policy)
	if err != nil || !strings.Contains(stdout, "kind: ValidatingPolicy") || !strings.Contains(stdout, "app.kubernetes.io/name") {
		t.Errorf("with --partial: err %v, stdout:\n%s", err, stdout)
	}
}

// TestConvertVerifiesTestdataSuites: each testdata case with its own
// kyverno-test suite converts cleanly and gives the same verdicts on the
// original and the conversion, with the output kinds the table names.
func TestConvertVerifiesTestdataSuites(t *testing.T) {
	cases := []struct{ dir, output string }{
		// generate clone and cloneList read their sources with
		// resource.Get and resource.List; the suite's sources are
		// cluster resources that both the original's clone and the
		// conversion's reads see.
		{"clone", "2 GeneratingPolicy"},
		// a quoted '{{ element.name }}' inside a filter, a boolean's
		// truthiness, lists missing on some resources.
		{"foreach-filter", "ValidatingPolicy"},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			dir := filepath.Join("..", "..", "internal", "convert", "testdata", c.dir)
			stdout, stderr, err := runCharter(t, "convert", "--verify", "--check", dir)
			if err != nil {
				t.Fatalf("convert --verify --check: %v\n%s%s", err, stdout, stderr)
			}
			if !strings.Contains(stdout, "verdicts equal: 1 of 1 verified") || !strings.Contains(stdout, c.output) {
				t.Fatalf("want the policy converted to %s and verified:\n%s", c.output, stdout)
			}
		})
	}
}
