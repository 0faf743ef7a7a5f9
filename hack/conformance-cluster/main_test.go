package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charter-dev/charter/internal/corpus"
)

// chainsawCorpus is Kyverno's chainsaw suite inside the shared corpus.
func chainsawCorpus(t *testing.T) string {
	t.Helper()
	return filepath.Join(corpus.Require(t), "kyverno-chainsaw")
}

// TestSkipFileNamesTestsOfTheSuite: every entry of skip.yaml names a test
// of the suite and says why, so the list cannot hide a test that does not
// exist or skip one without a reason.
func TestSkipFileNamesTestsOfTheSuite(t *testing.T) {
	skips, err := loadSkips("skip.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(skips.ImplementationDetails) == 0 {
		t.Fatal("skip.yaml lists no implementation details")
	}
	plan, err := planTests(chainsawCorpus(t), defaultDirs, skips, nil)
	if err != nil {
		t.Fatal(err)
	}
	var run, skipped int
	for _, d := range plan {
		run += len(d.tests)
		skipped += len(d.skipped)
	}
	if want := len(skips.ImplementationDetails) + len(skips.Network) + len(skips.Node); skipped != want {
		t.Errorf("%d tests skipped, skip.yaml lists %d", skipped, want)
	}
	if run == 0 {
		t.Error("no test left to run")
	}
}

// TestSkipFileRefusesEntriesWithoutReasonOrTest: an entry without a
// reason, an unknown field, or a test the suite does not hold is an error
// naming it.
func TestSkipFileRefusesEntriesWithoutReasonOrTest(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "skip.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ name, body, want string }{
		{"no reason", "implementationDetails:\n- test: validating-policies/apply-v1\n", `("validating-policies/apply-v1") needs both test and reason`},
		{"no test", "network:\n- reason: pulls an image\n", "needs both test and reason"},
		{"unknown field", "implementationDetail: []\n", "implementationDetail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadSkips(write(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("loadSkips = %v, want an error with %q", err, tc.want)
			}
		})
	}
	skips, err := loadSkips(write("network:\n- test: validating-policies/no-such-test\n  reason: pulls an image\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := planTests(chainsawCorpus(t), defaultDirs, skips, nil); err == nil || !strings.Contains(err.Error(), "validating-policies/no-such-test") {
		t.Errorf("planTests with an unknown skip = %v, want an error naming it", err)
	}
}

// TestReportCountsChainsawResults reads a report in chainsaw's JSON format:
// a test with a failed operation fails (its first failing step and error
// are named), a skipped test is counted as skipped, the rest pass.
func TestReportCountsChainsawResults(t *testing.T) {
	out := t.TempDir()
	report := `{"name":"report-x","tests":[
	  {"basePath":"/c/validating-policies/a","name":"a","steps":[{"name":"create policy","operations":[{"name":"create","type":"create"}]}]},
	  {"basePath":"/c/validating-policies/b","name":"b","steps":[
	    {"name":"create policy","operations":[{"type":"create"}]},
	    {"name":"wait-ready","operations":[{"type":"assert","failure":{"error":"status.conditionStatus.ready:\n  Invalid value: false: Expected value: true"}}]},
	    {"name":"later","operations":[{"type":"assert","failure":{"error":"second"}}]}]},
	  {"basePath":"/c/validating-policies/c","name":"c","skipped":true}]}`
	if err := os.WriteFile(filepath.Join(out, "report-x.json"), []byte(report), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := readReport("/c", "x", filepath.Join(out, "report-x.json"), dirResult{dir: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if res.passed != 1 || res.failed != 1 || res.skipped != 1 {
		t.Fatalf("passed/failed/skipped = %d/%d/%d, want 1/1/1", res.passed, res.failed, res.skipped)
	}
	f := res.failures[0]
	if f.test != "validating-policies/b" || f.step != "wait-ready" || f.err != "status.conditionStatus.ready: Invalid value: false: Expected value: true" {
		t.Errorf("failure = %+v", f)
	}
	var buf bytes.Buffer
	if n := printSummary(&buf, []dirResult{res}); n != 1 {
		t.Errorf("printSummary counted %d failures, want 1", n)
	}
	for _, want := range []string{"50.0%", "validating-policies/b [step wait-ready]"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, buf.String())
		}
	}
}

// TestSkipsPrintedAreThoseOfThePlan: with -dirs (or -run) limiting the
// run, the list of tests not run names only the skipped tests of what was
// asked for, under their reason's heading; a heading without tests is
// left out.
func TestSkipsPrintedAreThoseOfThePlan(t *testing.T) {
	skips, err := loadSkips("skip.yaml")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := planTests(chainsawCorpus(t), []string{"namespaced-deleting-policies"}, skips, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printSkips(&out, plan)
	got := out.String()
	if !strings.Contains(got, "not run: 1 tests check a Kyverno implementation detail") || !strings.Contains(got, "  namespaced-deleting-policies/schedule: ") {
		t.Errorf("skips printed for namespaced-deleting-policies:\n%s\nwant its one skipped test", got)
	}
	for _, other := range []string{"validating-policies/", "network"} {
		if strings.Contains(got, "  "+other) || strings.Contains(got, "no network") {
			t.Errorf("skips printed for namespaced-deleting-policies name %s:\n%s", other, got)
		}
	}
}

// TestCopySuiteLeavesTheSuiteAlone: the tests run in a copy of the suite,
// whose files are writable; writing there changes nothing in the suite.
func TestCopySuiteLeavesTheSuiteAlone(t *testing.T) {
	src := filepath.Join(t.TempDir(), "suite")
	if err := os.MkdirAll(filepath.Join(src, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	orig := filepath.Join(src, "a", "b", "chainsaw-test.yaml")
	if err := os.WriteFile(orig, []byte("kind: Test\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	dst, err := copySuite(src, filepath.Join(t.TempDir(), "copy"))
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dst, "a", "b", "chainsaw-test.yaml")
	if err := os.WriteFile(copied, []byte("changed by a test\n"), 0o644); err != nil {
		t.Fatalf("the copy is not writable: %v", err)
	}
	if data, err := os.ReadFile(orig); err != nil || string(data) != "kind: Test\n" {
		t.Errorf("the suite's file reads %q, %v after the copy was written", data, err)
	}
}

// TestCopySuiteReadsThroughFlattenedLinks: a file of the suite that is a
// symbolic link of Kyverno's repository stored as its target path is
// copied as the file it names, as a checkout with links reads it; a file
// that only looks like a path is copied as it is.
func TestCopySuiteReadsThroughFlattenedLinks(t *testing.T) {
	src := filepath.Join(t.TempDir(), "suite")
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(src, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const template = "kind: StepTemplate\nmetadata: {name: create-policy}\n"
	write("_step-templates/create-policy.yaml", template)
	files := []struct{ rel, content, want string }{
		{"ns/_step-templates/create-policy.yaml", "../../_step-templates/create-policy.yaml", template},
		{"ns/_step-templates/missing.yaml", "../../_step-templates/missing.yaml", "../../_step-templates/missing.yaml"},
		{"ns/outside.yaml", "../../../etc/hostname", "../../../etc/hostname"},
		{"ns/two-lines.yaml", "../../_step-templates/create-policy.yaml\n", "../../_step-templates/create-policy.yaml\n"},
		{"ns/test/chainsaw-test.yaml", "kind: Test\n", "kind: Test\n"},
	}
	for _, f := range files {
		write(f.rel, f.content)
	}
	dst, err := copySuite(src, filepath.Join(t.TempDir(), "copy"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(dst, filepath.FromSlash(f.rel)))
		if err != nil || string(got) != f.want {
			t.Errorf("%s: copied as %q, %v; want %q", f.rel, got, err, f.want)
		}
	}
}

// TestCopySuiteRestoresTheNamespacedStepTemplates: the corpus's
// namespaced-*-policies/_step-templates are such links; their copies are
// the suite's step templates (namespaced-validating-policies/
// match-conditions/failure-policy/default loads them).
func TestCopySuiteRestoresTheNamespacedStepTemplates(t *testing.T) {
	src := chainsawCorpus(t)
	dst, err := copySuite(src, filepath.Join(t.TempDir(), "suite"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"namespaced-validating-policies", "namespaced-mutating-policies", "namespaced-generating-policies"} {
		matches, err := filepath.Glob(filepath.Join(dst, dir, "_step-templates", "*.yaml"))
		if err != nil || len(matches) == 0 {
			t.Fatalf("%s: no step templates copied (%v)", dir, err)
		}
		for _, m := range matches {
			got, _ := os.ReadFile(m)
			want, err := os.ReadFile(filepath.Join(src, "_step-templates", filepath.Base(m)))
			if err != nil || !bytes.Equal(got, want) || !strings.Contains(string(got), "kind: StepTemplate") {
				t.Errorf("%s: copied as %q, want the suite's _step-templates/%s", m, got, filepath.Base(m))
			}
		}
	}
}
