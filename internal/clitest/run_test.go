package clitest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/charter-dev/charter/internal/corpus"
)

func runPaths(t *testing.T, paths ...string) []*SuiteResult {
	t.Helper()
	results, err := NewRunner(Options{}).Run(context.Background(), paths)
	if err != nil {
		t.Fatal(err)
	}
	return results
}

// TestRunGoodSuiteBesideBrokenOne checks every comparison rule end to end on
// tiny policies, and that a broken suite is reported while the others run.
func TestRunGoodSuiteBesideBrokenOne(t *testing.T) {
	results := runPaths(t, "testdata/run")
	if len(results) != 2 {
		t.Fatalf("got %d suites, want 2", len(results))
	}
	broken, good := results[0], results[1]
	if broken.Err == nil || !strings.Contains(broken.Err.Error(), "broken/kyverno-test.yaml: resources[0]") ||
		!strings.Contains(broken.Err.Error(), "missing.yaml") {
		t.Errorf("broken suite: error %v, want one naming the test file, the field and the missing file", broken.Err)
	}
	if good.Err != nil {
		t.Fatalf("good suite: %v", good.Err)
	}
	want := []short{
		{"check-app", "v1/Pod/default/good", Passed, "Ok"},
		{"check-app", "v1/Pod/default/system", Passed, "Ok"},
		{"check-app", "v1/Pod/default/bad", Passed, "Ok"},
		{"autogen-check-app", "apps/v1/Deployment/default/web", Passed, "Ok"},
		{"skip-system", "v1/Pod/default/good", Passed, "Ok"},
		{"skip-system", "v1/Pod/default/system", Passed, "Ok"},
		{"check-app", "v1/ConfigMap/default/settings", Passed, "Excluded"},
		{"no-latest-tag", "v1/Pod/team-a/latest", Passed, "Ok"},
	}
	checkRows(t, good.Rows, want)
	if len(good.Warnings) != 1 || !strings.Contains(good.Warnings[0], "duplicate resource v1/Pod/default/good") {
		t.Errorf("warnings: %v, want the duplicate Pod", good.Warnings)
	}

	var out, errOut bytes.Buffer
	tally, err := Report(&out, &errOut, results, ReportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !tally.AnyFailure() {
		t.Error("a broken suite must fail the run")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; last != "Summary: 8 passed, 0 failed" {
		t.Errorf("last line %q", last)
	}
	if !strings.Contains(errOut.String(), "Error: testdata/run/broken/kyverno-test.yaml") {
		t.Errorf("stderr does not report the broken suite:\n%s", errOut.String())
	}
	if strings.Contains(out.String(), "\x1b[") {
		t.Error("colour written to a non-terminal")
	}
}

func TestReportJSON(t *testing.T) {
	results := runPaths(t, "testdata/run/good")
	var out, errOut bytes.Buffer
	if _, err := Report(&out, &errOut, results, ReportOptions{Output: "json"}); err != nil {
		t.Fatal(err)
	}
	var records []map[string]any
	if err := json.Unmarshal(out.Bytes(), &records); err != nil {
		t.Fatalf("stdout is not a JSON array: %v\n%s", err, out.String())
	}
	if len(records) != 8 {
		t.Fatalf("got %d records, want one per row (8)", len(records))
	}
	for _, key := range []string{"suite", "policy", "rule", "resource", "expected", "actual", "reason", "message"} {
		if _, ok := records[2][key]; !ok {
			t.Errorf("record has no %q: %v", key, records[2])
		}
	}
	if records[2]["expected"] != "fail" || records[2]["actual"] != "fail" || records[2]["message"] == "" {
		t.Errorf("record 3: %v", records[2])
	}
	if !regexp.MustCompile(`Summary: [0-9]+ passed, [0-9]+ failed`).MatchString(errOut.String()) {
		t.Errorf("the summary line belongs on stderr with -o json, got %q", errOut.String())
	}
}

func TestReportFailOnlyAndDetailed(t *testing.T) {
	results := []*SuiteResult{{
		Suite: &Suite{File: "s.yaml", Test: &Test{}},
		Rows: []Row{
			{ID: 1, Policy: "p", Rule: "r", Resource: "v1/Pod/default/a", Verdict: Passed, Reason: "Ok", Message: "fine"},
			{ID: 2, Policy: "p", Rule: "r", Resource: "v1/Pod/default/b", Verdict: Failed, Reason: "Want pass, got fail", Message: "label app is required"},
			{ID: 3, Policy: "p", Rule: "r", Resource: "v1/Pod/default/c", Verdict: Failed, Reason: "Invalid policy: spec.rules: a policy needs at least one rule"},
		},
	}}
	var out bytes.Buffer
	if _, err := Report(&out, &bytes.Buffer{}, results, ReportOptions{FailOnly: true, Detailed: true}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if strings.Contains(got, "default/a") || !strings.Contains(got, "default/b") {
		t.Errorf("--fail-only kept the wrong rows:\n%s", got)
	}
	if !strings.Contains(got, "MESSAGE") || !strings.Contains(got, "label app is required") {
		t.Errorf("--detailed-results shows no message:\n%s", got)
	}
	if !strings.Contains(got, "Invalid policy: spec.rules: a policy needs at least one rule") {
		t.Errorf("the invalid policy's row does not say why:\n%s", got)
	}
	if !strings.HasSuffix(got, "Summary: 1 passed, 2 failed\n") {
		t.Errorf("summary: %q", got)
	}
}

// TestFlippedExpectationFailsExactlyThatRow copies a conformance suite,
// flips one expected result and checks that exactly that row fails.
func TestFlippedExpectationFailsExactlyThatRow(t *testing.T) {
	src := filepath.Join(corpus.Require(t), "kyverno-policies/best-practices/disallow-latest-tag")
	dir := t.TempDir()
	copyFile(t, filepath.Join(src, "disallow-latest-tag.yaml"), filepath.Join(dir, "disallow-latest-tag.yaml"))
	suite := filepath.Join(dir, ".kyverno-test")
	if err := os.MkdirAll(suite, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(src, ".kyverno-test", "resource.yaml"), filepath.Join(suite, "resource.yaml"))
	test, err := os.ReadFile(filepath.Join(src, ".kyverno-test", "kyverno-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	original := runOne(t, dir, test)
	if c := count(original); c.Failed != 0 || c.Passed == 0 {
		t.Fatalf("the untouched suite must pass: %+v", c)
	}
	// Flip the first "result: pass" to fail.
	flipped := strings.Replace(string(test), "result: pass", "result: fail", 1)
	if flipped == string(test) {
		t.Fatal("no result: pass to flip")
	}
	rows := runOne(t, dir, []byte(flipped))
	c := count(rows)
	if c.Failed != 1 || c.Passed != len(original)-1 {
		t.Fatalf("after flipping one expectation: %+v, want exactly 1 failure of %d rows", c, len(original))
	}
	for _, r := range rows {
		if r.Verdict == Failed && (r.Expected != "fail" || r.Actual != "pass" || r.Reason != "Want fail, got pass") {
			t.Errorf("the failing row is not the flipped one: %+v", r)
		}
	}
}

func runOne(t *testing.T, dir string, test []byte) []Row {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, ".kyverno-test", DefaultFileName), test, 0o644); err != nil {
		t.Fatal(err)
	}
	results := runPaths(t, dir)
	if len(results) != 1 || results[0].Err != nil {
		t.Fatalf("results: %+v", results)
	}
	return results[0].Rows
}

func count(rows []Row) Counts {
	var c Counts
	c.Add(rows)
	return c
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkValidateCorpus runs the conformance corpus's validate suites, the
// workload `make bench-cli` times end to end.
func BenchmarkValidateCorpus(b *testing.B) {
	paths, err := corpus.Suites(corpus.Require(b), "validate")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := NewRunner(Options{}).Run(context.Background(), paths); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRunCELParams: a validate.cel rule with paramKind reads its params from
// the suite's paramResources.
func TestRunCELParams(t *testing.T) {
	results := runPaths(t, "testdata/celparams")
	if len(results) != 1 || results[0].Err != nil {
		t.Fatalf("results %+v", results)
	}
	want := []short{
		{"replicas-within-limit", "apps/v1/Deployment/shop/small", Passed, "Ok"},
		{"replicas-within-limit", "apps/v1/Deployment/shop/large", Passed, "Ok"},
	}
	rows := results[0].Rows
	checkRows(t, rows, want)
}

// TestRunCannotPassVacuously: a suite whose policy is invalid, of a kind
// charter does not evaluate, or whose rule uses a feature charter does not
// run in the CLI fails each such expected result with the reason,
// and a suite none of whose results met a rule response fails as having
// checked nothing. Each makes the run fail on its own.
func TestRunCannotPassVacuously(t *testing.T) {
	tests := []struct {
		dir            string
		want           []short
		checkedNothing bool
	}{
		{"invalid", []short{{"r", "v1/Pod/default/web", Failed,
			`Invalid policy: spec.rules[0].validate.pattern.spec.containers[0]: unknown anchor "~(x)"`}}, false},
		{"unsupported", []short{{"", "v1/Pod/default/web", Failed,
			"Unsupported: admissionregistration.k8s.io/v1 MutatingAdmissionPolicy is not supported by charter yet"}}, false},
		{"unmatched", []short{{"r", "v1/Pod/default/web", Passed, "Excluded"}}, true},
		{"unsupported-feature", []short{
			{"signed", "v1/Pod/default/web", Failed,
				"Unsupported: spec.rules[0].validate.assert: validate.assert is not supported by charter anywhere yet"},
			{"labelled", "v1/Pod/default/web", Passed, "Ok"},
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			results := runPaths(t, filepath.Join("testdata/vacuous", tt.dir))
			if len(results) != 1 || results[0].Err != nil {
				t.Fatalf("results: %+v", results)
			}
			res := results[0]
			checkRows(t, res.Rows, tt.want)
			if got := res.CheckedNothing != ""; got != tt.checkedNothing {
				t.Errorf("checked nothing: %q, want it said: %v", res.CheckedNothing, tt.checkedNothing)
			}
			var out bytes.Buffer
			tally, err := Report(&out, &bytes.Buffer{}, results, ReportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !tally.AnyFailure() || !res.Failed() {
				t.Errorf("the run passes:\n%s", out.String())
			}
			if tt.checkedNothing && !strings.Contains(out.String(), "checked nothing: none of its 1 expected results matched a rule response") {
				t.Errorf("the table does not say the suite checked nothing:\n%s", out.String())
			}
		})
	}
}

// TestRunSameNameDifferentKinds: a suite holding a ClusterPolicy and a
// ValidatingPolicy of one name (a migration halfway) judges each expected
// result against the kind its flags name; the two policies give opposite
// verdicts on each Pod, so a row judged against the other kind fails.
// The same policy declared in two files is an error naming both.
func TestRunSameNameDifferentKinds(t *testing.T) {
	results := runPaths(t, "testdata/samename/both")
	if len(results) != 1 || results[0].Err != nil {
		t.Fatalf("results: %+v", results)
	}
	checkRows(t, results[0].Rows, []short{
		{"no-latest-tag", "v1/Pod/default/latest-labelled", Passed, "Ok"},
		{"no-latest-tag", "v1/Pod/default/pinned-unlabelled", Passed, "Ok"},
		{"", "v1/Pod/default/latest-labelled", Passed, "Ok"},
		{"", "v1/Pod/default/pinned-unlabelled", Passed, "Ok"},
	})
	if len(results[0].Warnings) != 0 {
		t.Errorf("warnings: %v", results[0].Warnings)
	}

	results = runPaths(t, "testdata/samename/duplicate")
	if len(results) != 1 || results[0].Err == nil {
		t.Fatalf("results: %+v, want the suite's error", results)
	}
	msg := results[0].Err.Error()
	for _, want := range []string{"policies[1]", "ClusterPolicy disallow-latest is declared twice", filepath.Join("duplicate", "a.yaml"), filepath.Join("duplicate", "b.yaml")} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}
