package clitest

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseCaseSelector(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    CaseSelector
		wantErr string
	}{
		{in: DefaultCaseSelector, want: CaseSelector{"*", "*", "*"}},
		{in: "", want: CaseSelector{"*", "*", "*"}},
		{in: "policy=disallow-latest-tag, rule=require-image-tag, resource=test-pass", want: CaseSelector{"disallow-latest-tag", "require-image-tag", "test-pass"}},
		{in: "resource=bad-*", want: CaseSelector{"*", "*", "bad-*"}},
		{in: "kind=Pod", wantErr: `unknown key "kind"`},
		{in: "policy", wantErr: "is not key=value"},
		{in: "policy=", wantErr: "is not key=value"},
	} {
		got, err := ParseCaseSelector(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || *got != tc.want {
			t.Errorf("%q = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// TestCaseSelectorNarrowsTheRun: -t picks expected results by policy, rule
// and resource; a result is narrowed to the resources picked, and a suite
// left with none is not run at all.
func TestCaseSelectorNarrowsTheRun(t *testing.T) {
	run := func(selector string) []*SuiteResult {
		t.Helper()
		sel, err := ParseCaseSelector(selector)
		if err != nil {
			t.Fatal(err)
		}
		results, err := NewRunner(Options{Selector: sel}).Run(context.Background(), []string{"testdata/run/good", "testdata/requiretests"})
		if err != nil {
			t.Fatal(err)
		}
		return results
	}
	results := run("policy=require-team,resource=unl*")
	if len(results) != 1 {
		t.Fatalf("got %d suites, want only require-team's", len(results))
	}
	checkRows(t, results[0].Rows, []short{{"team-label", "v1/Pod/default/unlabelled", Passed, "Ok"}})

	results = run("rule=no-latest-tag")
	if len(results) != 1 || !strings.Contains(results[0].Suite.File, "run/good") {
		t.Fatalf("suites %v, want the one with no-latest-tag", suiteNames(results))
	}
	checkRows(t, results[0].Rows, []short{{"no-latest-tag", "v1/Pod/team-a/latest", Passed, "Ok"}})

	if results := run("policy=nothing-*"); len(results) != 0 {
		t.Fatalf("suites %v, want none", suiteNames(results))
	}
}

func suiteNames(results []*SuiteResult) []string {
	var out []string
	for _, r := range results {
		out = append(out, r.Suite.Name())
	}
	return out
}

// TestUntestedPolicies: --require-tests names every policy under the paths
// that no expected result names, with its file; other manifests and test
// inputs are passed over.
func TestUntestedPolicies(t *testing.T) {
	paths := []string{"testdata/requiretests"}
	results, err := NewRunner(Options{}).Run(context.Background(), paths)
	if err != nil {
		t.Fatal(err)
	}
	got, err := UntestedPolicies(paths, results)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"no-latest (testdata/requiretests/untested/policy.yaml)"}; !slices.Equal(got, want) {
		t.Errorf("untested = %q, want %q", got, want)
	}
	got, err = UntestedPolicies([]string{"testdata/requiretests/tested"}, results)
	if err != nil || len(got) != 0 {
		t.Errorf("untested in tested/ = %q, %v; want none", got, err)
	}
}

// TestJUnitOutput writes -o junit for a run with passing rows, a failing
// row and a suite that could not run, and checks it against the JUnit
// schema (checkJUnit) and for the failure's details.
func TestJUnitOutput(t *testing.T) {
	results := runPaths(t, "testdata/run", "testdata/requiretests")
	// Flip one row to failing, as a regression would.
	for _, r := range results {
		if r.Err == nil && len(r.Rows) > 0 && strings.Contains(r.Suite.File, "requiretests") {
			r.Rows[1].Verdict, r.Rows[1].Reason, r.Rows[1].Actual = Failed, "Want fail, got pass", "pass"
		}
	}
	var out, errOut bytes.Buffer
	tally, err := Report(&out, &errOut, results, ReportOptions{Output: "junit"})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkJUnit(out.Bytes()); err != nil {
		t.Fatalf("not valid JUnit: %v\n%s", err, out.String())
	}
	doc := out.String()
	for _, want := range []string{
		`<testsuites name="charter test" tests="11" failures="1" errors="1">`,
		`<failure message="Want fail, got pass" type="Fail">policy require-team, rule team-label, resource v1/Pod/default/unlabelled: want fail, got pass</failure>`,
		`<error message="test file could not be run" type="Error">`,
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("JUnit output lacks %s:\n%s", want, doc)
		}
	}
	if !tally.AnyFailure() || !strings.Contains(errOut.String(), "Summary: 9 passed, 1 failed") {
		t.Errorf("summary on stderr: %q", errOut.String())
	}

	out.Reset()
	if _, err := Report(&out, io.Discard, results, ReportOptions{Output: "junit", FailOnly: true}); err != nil {
		t.Fatal(err)
	}
	if err := checkJUnit(out.Bytes()); err != nil || strings.Count(out.String(), "<testcase ") != 2 {
		t.Errorf("fail-only JUnit (%v): want the failing row and the broken suite:\n%s", err, out.String())
	}
}

// TestCheckJUnitRejects: the schema check fails documents a JUnit reader
// would refuse or misread, so TestJUnitOutput can fail.
func TestCheckJUnitRejects(t *testing.T) {
	for _, doc := range []string{
		`<testsuite name="x" tests="1"><testcase name="a"/></testsuite>`,
		`<testsuites><testsuite tests="1"><testcase name="a"/></testsuite></testsuites>`,
		`<testsuites><testsuite name="x" tests="2"><testcase name="a"/></testsuite></testsuites>`,
		`<testsuites><testsuite name="x" tests="1" failures="0"><testcase name="a"><failure message="m"/></testcase></testsuite></testsuites>`,
		`<testsuites><testsuite name="x" tests="1"><testcase classname="c"/></testsuite></testsuites>`,
		`<testsuites><testsuite name="x" tests="1"><testcase name="a"><oops/></testcase></testsuite></testsuites>`,
		`<testsuites><testsuite name="x" tests="-1"></testsuite></testsuites>`,
		`<testsuites><testsuite name="x" tests="1" colour="red"><testcase name="a"/></testsuite></testsuites>`,
	} {
		if err := checkJUnit([]byte(doc)); err == nil {
			t.Errorf("accepted %s", doc)
		}
	}
}

// xmlNode is a parsed element: its attributes and child elements.
type xmlNode struct {
	name     string
	attrs    map[string]string
	children []*xmlNode
}

func parseXML(data []byte) (*xmlNode, error) {
	dec := xml.NewDecoder(bytes.NewReader(data))
	var stack []*xmlNode
	var root *xmlNode
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &xmlNode{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				n.attrs[a.Name.Local] = a.Value
			}
			if len(stack) == 0 {
				if root != nil {
					return nil, fmt.Errorf("more than one root element")
				}
				root = n
			} else {
				parent := stack[len(stack)-1]
				parent.children = append(parent.children, n)
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	if root == nil {
		return nil, fmt.Errorf("no root element")
	}
	return root, nil
}

// junitElement is one element of the JUnit schema (the Ant/Jenkins
// junit-10.xsd that CI reporters validate against): its attributes,
// required ones, integer ones, and the child elements it may hold.
type junitElement struct {
	attrs, required, integers []string
	children                  []string
}

var junitSchema = map[string]junitElement{
	"testsuites": {
		attrs:    []string{"name", "time", "tests", "failures", "errors", "disabled", "skipped"},
		integers: []string{"tests", "failures", "errors", "disabled", "skipped"},
		children: []string{"testsuite"},
	},
	"testsuite": {
		attrs:    []string{"name", "tests", "failures", "errors", "skipped", "disabled", "time", "timestamp", "hostname", "id", "package", "file"},
		required: []string{"name", "tests"},
		integers: []string{"tests", "failures", "errors", "skipped", "disabled", "id"},
		children: []string{"properties", "testcase", "system-out", "system-err"},
	},
	"testcase": {
		attrs:    []string{"name", "classname", "assertions", "time", "status", "file", "line"},
		required: []string{"name"},
		integers: []string{"assertions", "line"},
		children: []string{"skipped", "error", "failure", "system-out", "system-err"},
	},
	"failure":    {attrs: []string{"message", "type"}},
	"error":      {attrs: []string{"message", "type"}},
	"skipped":    {attrs: []string{"message"}},
	"system-out": {},
	"system-err": {},
	"properties": {children: []string{"property"}},
	"property":   {attrs: []string{"name", "value"}, required: []string{"name", "value"}},
}

// checkJUnit checks a JUnit XML document as the schema does: testsuites at
// the root, only known elements where the schema allows them, only known
// attributes, required attributes present, counts that are non-negative
// integers; and, as readers rely on it, counts that agree with the
// testcases they count.
func checkJUnit(data []byte) error {
	root, err := parseXML(data)
	if err != nil {
		return err
	}
	if root.name != "testsuites" {
		return fmt.Errorf("root element <%s>, want <testsuites>", root.name)
	}
	if err := checkJUnitNode(root, "testsuites"); err != nil {
		return err
	}
	var tests, failures, errs int
	for _, s := range root.children {
		var cases, caseFailures, caseErrors int
		for _, c := range s.children {
			if c.name != "testcase" {
				continue
			}
			cases++
			for _, p := range c.children {
				switch p.name {
				case "failure":
					caseFailures++
				case "error":
					caseErrors++
				}
			}
		}
		for _, cnt := range []struct {
			attr string
			n    int
		}{{"tests", cases}, {"failures", caseFailures}, {"errors", caseErrors}} {
			if v, ok := s.attrs[cnt.attr]; (ok || cnt.n > 0) && v != strconv.Itoa(cnt.n) {
				return fmt.Errorf("testsuite %q: %s=%q, but it holds %d", s.attrs["name"], cnt.attr, v, cnt.n)
			}
		}
		tests, failures, errs = tests+cases, failures+caseFailures, errs+caseErrors
	}
	for _, cnt := range []struct {
		attr string
		n    int
	}{{"tests", tests}, {"failures", failures}, {"errors", errs}} {
		if v, ok := root.attrs[cnt.attr]; ok && v != strconv.Itoa(cnt.n) {
			return fmt.Errorf("testsuites: %s=%q, but its suites hold %d", cnt.attr, v, cnt.n)
		}
	}
	return nil
}

func checkJUnitNode(n *xmlNode, path string) error {
	el, known := junitSchema[n.name]
	if !known {
		return fmt.Errorf("%s: unknown element", path)
	}
	for a, v := range n.attrs {
		if !slices.Contains(el.attrs, a) {
			return fmt.Errorf("%s: attribute %q not in the schema", path, a)
		}
		if slices.Contains(el.integers, a) {
			if i, err := strconv.Atoi(v); err != nil || i < 0 {
				return fmt.Errorf("%s: %s=%q is no non-negative integer", path, a, v)
			}
		}
		if a == "time" {
			if f, err := strconv.ParseFloat(v, 64); err != nil || f < 0 {
				return fmt.Errorf("%s: time=%q is no duration in seconds", path, v)
			}
		}
	}
	for _, a := range el.required {
		if _, ok := n.attrs[a]; !ok {
			return fmt.Errorf("%s: required attribute %q missing", path, a)
		}
	}
	for _, c := range n.children {
		if !slices.Contains(el.children, c.name) {
			return fmt.Errorf("%s: <%s> not allowed in <%s>", path, c.name, n.name)
		}
		if err := checkJUnitNode(c, path+"/"+c.name); err != nil {
			return err
		}
	}
	return nil
}

// TestRootConfinesTheRun: with Options.Root (the GitOps test gate's
// checkout), a suite naming a file outside the root cannot run; inside, it
// runs as usual.
func TestRootConfinesTheRun(t *testing.T) {
	suite := "testdata/requiretests/tested/.kyverno-test"
	results, err := NewRunner(Options{Root: suite}).Run(context.Background(), []string{suite})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].Err == nil || !strings.Contains(results[0].Err.Error(), "policy.yaml: outside ") {
		t.Fatalf("results %+v, want the suite refused for ../policy.yaml", results)
	}
	failures, err := RepositoryTests{}.RunTests(context.Background(), "testdata/requiretests/tested", suite)
	if err != nil || len(failures) != 0 {
		t.Fatalf("inside the root: failures %q, %v", failures, err)
	}
	if _, err := (RepositoryTests{}).RunTests(context.Background(), "testdata/requiretests", "testdata/requiretests/untested"); err == nil {
		t.Fatal("a folder without suites passed the gate")
	}
}
