package clitest

import (
	"encoding/xml"
	"fmt"
	"io"
)

// The JUnit XML that CI systems read (Jenkins, GitLab, GitHub reporters):
// one <testsuite> per test file document, one <testcase> per row. A
// failing row carries a <failure>; a suite that could not run is a suite
// with one <testcase> carrying an <error>; a suite that checked nothing
// one with a <failure> saying so.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the results as JUnit XML. Rows are filtered as for the
// other formats (failOnly).
func WriteJUnit(w io.Writer, results []*SuiteResult, failOnly bool) error {
	doc := junitSuites{Name: "charter test"}
	for _, r := range results {
		s := junitSuite{Name: r.Suite.Name()}
		if name := r.Suite.Test; name != nil && name.Metadata.Name != "" {
			s.Name += " (" + name.Metadata.Name + ")"
		}
		switch {
		case r.Err != nil:
			s.Cases = append(s.Cases, junitCase{
				Name: "load", ClassName: r.Suite.Name(),
				Error: &junitProblem{Message: "test file could not be run", Type: "Error", Text: r.Err.Error()},
			})
			s.Errors++
		default:
			for _, row := range selectRows(r.Rows, failOnly) {
				c := junitCase{
					Name:      fmt.Sprintf("%d %s/%s %s", row.ID, row.Policy, row.Rule, row.Resource),
					ClassName: r.Suite.Name(),
				}
				if row.Message != "" {
					c.SystemOut = row.Message
				}
				if row.Verdict == Failed {
					c.Failure = &junitProblem{Message: row.Reason, Type: "Fail",
						Text: fmt.Sprintf("policy %s, rule %s, resource %s: want %s, got %s", row.Policy, row.Rule, row.Resource, row.Expected, orNone(row.Actual))}
					s.Failures++
				}
				s.Cases = append(s.Cases, c)
			}
			if r.CheckedNothing != "" {
				s.Cases = append(s.Cases, junitCase{
					Name: "checked nothing", ClassName: r.Suite.Name(),
					Failure: &junitProblem{Message: "checked nothing", Type: "Fail", Text: r.CheckedNothing},
				})
				s.Failures++
			}
		}
		if failOnly && len(s.Cases) == 0 {
			continue
		}
		s.Tests = len(s.Cases)
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Errors += s.Errors
		doc.Suites = append(doc.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func orNone(s string) string {
	if s == "" {
		return "no response"
	}
	return s
}
