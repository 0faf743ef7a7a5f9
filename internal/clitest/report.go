package clitest

import (
	"fmt"
	"io"
	"strings"

	"github.com/charter-dev/charter/internal/printer"
)

// ReportOptions choose what Report prints.
type ReportOptions struct {
	// Output is "" (tables), "json", "yaml" or "junit".
	Output string
	// FailOnly keeps only failing rows.
	FailOnly bool
	// Detailed adds the rule message to each row.
	Detailed bool
	// Color paints results; set it only when writing to a terminal.
	Color bool
}

// Tally counts rows, suites that could not run (Broken) and suites that
// checked none of their results (CheckedNothing).
type Tally struct {
	Counts
	Broken, CheckedNothing int
}

// AnyFailure reports whether the run must fail: a row failed, a suite
// could not run or checked nothing, or no row was checked at all. A run
// that tested nothing never passes.
func (t Tally) AnyFailure() bool {
	return t.Counts.Failed > 0 || t.Broken > 0 || t.CheckedNothing > 0 || t.Passed+t.Counts.Failed == 0
}

// SummaryLine is the last line of a run: "Summary: N passed, M failed",
// with ", K suite(s) checked nothing" when some did, and "; nothing was
// checked" when no row was.
func (t Tally) SummaryLine() string {
	s := fmt.Sprintf("Summary: %d passed, %d failed", t.Passed, t.Counts.Failed)
	if t.CheckedNothing > 0 {
		s += fmt.Sprintf(", %d suite(s) checked nothing", t.CheckedNothing)
	}
	if t.Passed+t.Counts.Failed == 0 {
		s += "; nothing was checked"
	}
	return s
}

// TallyResults counts the rows of results.
func TallyResults(results []*SuiteResult) Tally {
	var t Tally
	for _, r := range results {
		if r.Err != nil {
			t.Broken++
			continue
		}
		if r.CheckedNothing != "" {
			t.CheckedNothing++
		}
		t.Add(r.Rows)
	}
	return t
}

// Report writes the results: a table per suite and the summary line, or,
// for json and yaml, one record per row. Errors and warnings go to errw, so
// machine output on w stays parseable.
func Report(w, errw io.Writer, results []*SuiteResult, opts ReportOptions) (Tally, error) {
	tally := TallyResults(results)
	for _, r := range results {
		if r.Err != nil {
			fmt.Fprintf(errw, "Error: %v\n", r.Err)
		}
		for _, warn := range r.Warnings {
			fmt.Fprintf(errw, "Warning: %s: %s\n", r.Suite.Name(), warn)
		}
		if r.Err == nil && r.CheckedNothing != "" && opts.Output != "" {
			fmt.Fprintf(errw, "Error: %s: checked nothing: %s\n", r.Suite.Name(), r.CheckedNothing)
		}
	}
	if opts.Output == "junit" {
		if err := WriteJUnit(w, results, opts.FailOnly); err != nil {
			return tally, err
		}
		if tally.Broken > 0 {
			fmt.Fprintf(errw, "%d test file(s) could not be run\n", tally.Broken)
		}
		fmt.Fprintln(errw, tally.SummaryLine())
		return tally, nil
	}
	if opts.Output != "" {
		rows := []Row{}
		for _, r := range results {
			rows = append(rows, selectRows(r.Rows, opts.FailOnly)...)
		}
		if err := printer.WriteObject(w, opts.Output, rows); err != nil {
			return tally, err
		}
		if tally.Broken > 0 {
			fmt.Fprintf(errw, "%d test file(s) could not be run\n", tally.Broken)
		}
		fmt.Fprintln(errw, tally.SummaryLine())
		return tally, nil
	}

	var b strings.Builder
	for _, r := range results {
		if r.Err != nil {
			continue
		}
		rows := selectRows(r.Rows, opts.FailOnly)
		if opts.FailOnly && len(rows) == 0 && r.CheckedNothing == "" {
			continue
		}
		title := r.Suite.Name()
		if name := r.Suite.Test.Metadata.Name; name != "" {
			title += " (" + name + ")"
		}
		fmt.Fprintf(&b, "Test %s\n", title)
		if len(rows) == 0 {
			if r.CheckedNothing != "" {
				fmt.Fprintf(&b, "  checked nothing: %s\n\n", r.CheckedNothing)
			} else {
				b.WriteString("  no results to check\n\n")
			}
			continue
		}
		headers := []string{"ID", "POLICY", "RULE", "RESOURCE", "RESULT", "REASON"}
		if opts.Detailed {
			headers = append(headers, "MESSAGE")
		}
		tbl := printer.NewTable(headers...)
		for _, row := range rows {
			cells := []printer.Cell{
				{Text: fmt.Sprint(row.ID)}, {Text: row.Policy}, {Text: row.Rule}, {Text: row.Resource},
				verdictCell(row.Verdict), {Text: row.Reason},
			}
			if opts.Detailed {
				cells = append(cells, printer.Cell{Text: row.Message})
			}
			tbl.AddCells(cells...)
		}
		if err := tbl.Write(&b, opts.Color); err != nil {
			return tally, err
		}
		if r.CheckedNothing != "" {
			fmt.Fprintf(&b, "  checked nothing: %s\n", r.CheckedNothing)
		}
		b.WriteByte('\n')
	}
	if tally.Broken > 0 {
		fmt.Fprintf(&b, "%d test file(s) could not be run\n", tally.Broken)
	}
	b.WriteString(tally.SummaryLine())
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return tally, err
}

func selectRows(rows []Row, failOnly bool) []Row {
	if !failOnly {
		return rows
	}
	var out []Row
	for _, r := range rows {
		if r.Verdict == Failed {
			out = append(out, r)
		}
	}
	return out
}

func verdictCell(v Verdict) printer.Cell {
	if v == Passed {
		return printer.Cell{Text: "Pass", Style: printer.Green}
	}
	return printer.Cell{Text: "Fail", Style: printer.Red}
}
