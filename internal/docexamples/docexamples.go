// Package docexamples reads the examples of Markdown pages: their fenced
// code blocks, the commands of their shell blocks and their links, so that
// a test can hold each one against the repository (cmd/charter's
// TestDocsExamples). It knows as much shell as the pages use: quotes,
// line continuations, comments, here-documents, pipes, redirections and
// command lists; anything else is an error naming the page and line, so a
// page cannot grow an example no test reads.
package docexamples

import (
	"fmt"
	"regexp"
	"strings"
)

// Block is one fenced code block.
type Block struct {
	// Page is the page's path, as given to Blocks.
	Page string
	// Line is the line of the opening fence, counted from 1.
	Line int
	// Lang is the fence's info string (sh, yaml, text, ...).
	Lang string
	// Text is the block's content, with a trailing newline.
	Text string
}

// Where names the block for a message: page:line.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.Page, b.Line) }

// IsShell reports whether the block holds commands to run.
func (b Block) IsShell() bool {
	switch b.Lang {
	case "sh", "bash", "shell":
		return true
	}
	return false
}

// Blocks returns the fenced code blocks of a Markdown page (``` fences,
// at most three spaces of indent). An unclosed fence is an error.
func Blocks(page string, markdown []byte) ([]Block, error) {
	var (
		out  []Block
		open *Block
		text strings.Builder
	)
	for i, line := range strings.Split(string(markdown), "\n") {
		trimmed := strings.TrimLeft(line, " ")
		fence := len(line)-len(trimmed) <= 3 && strings.HasPrefix(trimmed, "```")
		switch {
		case open == nil && fence:
			open = &Block{Page: page, Line: i + 1, Lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))}
			text.Reset()
		case open != nil && fence && strings.TrimSpace(trimmed) == "```":
			open.Text = text.String()
			out = append(out, *open)
			open = nil
		case open != nil:
			text.WriteString(line)
			text.WriteByte('\n')
		}
	}
	if open != nil {
		return nil, fmt.Errorf("%s: the code block opened here is never closed", open.Where())
	}
	return out, nil
}

// Link is one inline link outside code blocks.
type Link struct {
	Page   string
	Line   int
	Target string
}

// Where names the link for a message: page:line.
func (l Link) Where() string { return fmt.Sprintf("%s:%d", l.Page, l.Line) }

// linkTarget matches the target of an inline link, [text](target).
var linkTarget = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// Links returns the inline links of a page, those in code spans and code
// blocks left out.
func Links(page string, markdown []byte) []Link {
	var out []Link
	inBlock := false
	for i, line := range strings.Split(string(markdown), "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			continue
		}
		for _, m := range linkTarget.FindAllStringSubmatch(withoutCodeSpans(line), -1) {
			out = append(out, Link{Page: page, Line: i + 1, Target: m[1]})
		}
	}
	return out
}

func withoutCodeSpans(line string) string {
	parts := strings.Split(line, "`")
	for i := 1; i < len(parts); i += 2 {
		parts[i] = ""
	}
	return strings.Join(parts, "")
}

// Anchors returns the anchors GitHub gives a page's headings.
func Anchors(markdown []byte) map[string]bool {
	out := map[string]bool{}
	inBlock := false
	for _, line := range strings.Split(string(markdown), "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		if heading == "" || !strings.HasPrefix(line, strings.Repeat("#", len(line)-len(strings.TrimLeft(line, "#")))+" ") {
			continue
		}
		out[anchor(heading)] = true
	}
	return out
}

var notInAnchor = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)

// anchor is GitHub's: lower case, punctuation dropped, spaces to dashes.
func anchor(heading string) string {
	return strings.ReplaceAll(notInAnchor.ReplaceAllString(strings.ToLower(heading), ""), " ", "-")
}
