package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"
)

// ANSI styles, used only when the output is a terminal.
const (
	bold  = "\033[1m"
	green = "\033[32m"
	red   = "\033[31m"
	reset = "\033[0m"
)

// printer writes the benchmark's figures, in colour only on a terminal
// (and never when NO_COLOR is set).
type printer struct {
	w     io.Writer
	color bool
}

func newPrinter(f *os.File) *printer {
	p := &printer{w: f}
	if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("NO_COLOR") == "" {
		p.color = true
	}
	return p
}

func (p *printer) style(s, style string) string {
	if !p.color || s == "" {
		return s
	}
	return style + s + reset
}

func (p *printer) printf(format string, a ...any) { fmt.Fprintf(p.w, format, a...) }

// table prints rows under an upper-case header, columns left-aligned and
// three spaces apart, as kubectl does. Widths are measured on the plain
// text, so colouring never shifts a column.
func (p *printer) table(header []string, rows [][]string) {
	widths := make([]int, len(header))
	for _, row := range append([][]string{header}, rows...) {
		for i, cell := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	line := func(row []string, style string) {
		var b strings.Builder
		for i, cell := range row {
			if i == len(row)-1 {
				b.WriteString(cell)
				break
			}
			b.WriteString(cell)
			b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)+3))
		}
		fmt.Fprintln(p.w, p.style(b.String(), style))
	}
	line(header, bold)
	for _, row := range rows {
		line(row, "")
	}
}

// verdict prints a figure against its target, the last word coloured.
func (p *printer) verdict(label, figure, target string, met bool) {
	word, style := "met", green
	if !met {
		word, style = "MISSED", red
	}
	p.printf("%-26s %-10s %-18s %s\n", label, figure, "("+target+")", p.style(word, style))
}

// ms formats a latency in milliseconds with the precision that matters at
// its size.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return fmt.Sprintf("%.2fms", v)
	case v < 1000:
		return fmt.Sprintf("%.1fms", v)
	}
	return fmt.Sprintf("%.2fs", v/1000)
}

// signedMS formats a latency difference with its sign.
func signedMS(d time.Duration) string {
	if d < 0 {
		return "-" + ms(-d)
	}
	return "+" + ms(d)
}
