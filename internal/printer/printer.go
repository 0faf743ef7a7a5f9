// Package printer writes command output the way kubectl does: aligned
// tables with upper-case headers, colour only when writing to a terminal,
// and -o json|yaml for machines.
package printer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"
	"sigs.k8s.io/yaml"
)

// Style is how a table cell is coloured on a terminal.
type Style int

// Styles.
const (
	Plain Style = iota
	Green
	Red
	Yellow
	Bold
)

var escapes = map[Style]string{
	Green:  "\x1b[32m",
	Red:    "\x1b[31m",
	Yellow: "\x1b[33m",
	Bold:   "\x1b[1m",
}

const reset = "\x1b[0m"

// ColorEnabled reports whether w is a terminal that should get colour: a
// character device, and NO_COLOR unset (https://no-color.org).
func ColorEnabled(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	return term.IsTerminal(int(f.Fd()))
}

// Paint wraps s in the style's escape codes when colour is on.
func Paint(color bool, style Style, s string) string {
	if !color || style == Plain || s == "" {
		return s
	}
	return escapes[style] + s + reset
}

// Cell is a table cell with its style.
type Cell struct {
	Text  string
	Style Style
}

// Table is an aligned table: columns separated by three spaces, as
// `kubectl get` prints them.
type Table struct {
	headers []string
	rows    [][]Cell
}

// NewTable returns a table with these column headers (printed upper-case).
func NewTable(headers ...string) *Table {
	h := make([]string, len(headers))
	for i, s := range headers {
		h[i] = strings.ToUpper(s)
	}
	return &Table{headers: h}
}

// Add appends a row of plain cells.
func (t *Table) Add(cells ...string) {
	row := make([]Cell, len(cells))
	for i, c := range cells {
		row[i] = Cell{Text: c}
	}
	t.rows = append(t.rows, row)
}

// AddCells appends a row of styled cells.
func (t *Table) AddCells(cells ...Cell) { t.rows = append(t.rows, cells) }

// Len is the number of rows.
func (t *Table) Len() int { return len(t.rows) }

// Write prints the table; styles show only when color is true. Cells are
// padded by their visible width, so colour never breaks the alignment.
// Newlines inside a cell are shown as spaces.
func (t *Table) Write(w io.Writer, color bool) error {
	widths := make([]int, len(t.headers))
	for i, h := range t.headers {
		widths[i] = utf8.RuneCountInString(h)
	}
	clean := func(s string) string {
		if strings.IndexByte(s, '\n') < 0 {
			return s
		}
		return strings.ReplaceAll(s, "\n", " ")
	}
	for _, row := range t.rows {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(clean(c.Text)))
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	line := func(cells []Cell) {
		for i, c := range cells {
			text := clean(c.Text)
			bw.WriteString(Paint(color, c.Style, text))
			if i < len(cells)-1 {
				pad(bw, widths[i]-utf8.RuneCountInString(text)+3)
			}
		}
		bw.WriteByte('\n')
	}
	header := make([]Cell, len(t.headers))
	for i, h := range t.headers {
		header[i] = Cell{Text: h, Style: Bold}
	}
	line(header)
	for _, row := range t.rows {
		line(row)
	}
	return bw.Flush()
}

const spaces = "                                                                "

// pad writes n spaces without allocating.
func pad(w *bufio.Writer, n int) {
	for n > 0 {
		k := min(n, len(spaces))
		w.WriteString(spaces[:k])
		n -= k
	}
}

// WriteObject writes v as indented JSON or as YAML.
func WriteObject(w io.Writer, format string, v any) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("unknown output format %q: use json or yaml", format)
}

// CheckFormat validates an -o value; "" (a table) is allowed.
func CheckFormat(format string) error {
	switch format {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("unknown output format %q: use json or yaml", format)
}
