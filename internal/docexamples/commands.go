package docexamples

import (
	"fmt"
	"regexp"
	"strings"
)

// Command is one simple command of a shell block.
type Command struct {
	// Line is the page line the command starts on.
	Line int
	// Args are the command's words, quotes removed; leading variable
	// assignments (FOO=bar cmd) and redirections are left out.
	Args []string
	// Stdin is the body of the command's here-document, if any.
	Stdin string
}

// Commands returns the simple commands of a shell block, in order: a
// pipeline or list (|, &&, ||, ;, &) gives one Command per part.
func Commands(b Block) ([]Command, error) {
	lines := strings.Split(strings.TrimSuffix(b.Text, "\n"), "\n")
	var out []Command
	for i := 0; i < len(lines); i++ {
		start := i
		logical := lines[i]
		for strings.HasSuffix(logical, `\`) && i+1 < len(lines) {
			i++
			logical = strings.TrimSuffix(logical, `\`) + " " + lines[i]
		}
		line := b.Line + 1 + start
		cmds, heredoc, err := parseLine(logical, line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", b.Page, line, err)
		}
		if heredoc.word != "" {
			var body strings.Builder
			closed := false
			for i+1 < len(lines) {
				i++
				if strings.TrimSpace(lines[i]) == heredoc.word {
					closed = true
					break
				}
				body.WriteString(lines[i])
				body.WriteByte('\n')
			}
			if !closed {
				return nil, fmt.Errorf("%s:%d: the here-document <<%s is never closed", b.Page, line, heredoc.word)
			}
			cmds[heredoc.command].Stdin = body.String()
		}
		for _, c := range cmds {
			if len(c.Args) > 0 {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// heredoc is the here-document a line opens: its end word and the index
// of the command it feeds.
type heredoc struct {
	word    string
	command int
}

var (
	assignment      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	placeholderWord = regexp.MustCompile(`^<[^\s<>|;&]+>`)
)

// parseLine splits one logical line into simple commands.
func parseLine(s string, line int) ([]Command, heredoc, error) {
	var (
		cmds     = []Command{{Line: line}}
		words    []string
		hd       heredoc
		redirect bool // the next word is a redirection's target
		wantEnd  bool // the next word is a here-document's end word
	)
	endWord := func(w string) {
		switch {
		case wantEnd:
			hd = heredoc{word: strings.Trim(w, `'"`), command: len(cmds) - 1}
			wantEnd = false
		case redirect:
			redirect = false
		case len(words) == 0 && assignment.MatchString(w):
		default:
			words = append(words, w)
		}
	}
	endCommand := func() {
		cmds[len(cmds)-1].Args = words
		words = nil
		cmds = append(cmds, Command{Line: line})
	}
	var (
		word    strings.Builder
		inWord  bool
		literal bool // the word had quotes: an empty word still counts
	)
	flush := func() {
		if inWord || literal {
			endWord(word.String())
		}
		word.Reset()
		inWord, literal = false, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			i = len(s)
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, hd, fmt.Errorf("unclosed ' in %q", s)
			}
			word.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord, literal = true, true
		case c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				word.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, hd, fmt.Errorf("unclosed \" in %q", s)
			}
			i = j
			inWord, literal = true, true
		case c == '\\' && i+1 < len(s):
			i++
			word.WriteByte(s[i])
			inWord = true
		case c == '|' || c == ';' || (c == '&' && !(i > 0 && s[i-1] == '>')):
			flush()
			if i+1 < len(s) && (s[i+1] == '|' || s[i+1] == '&') {
				i++
			}
			endCommand()
		case c == '<' && strings.HasPrefix(s[i:], "<<"):
			flush()
			i++
			if i+1 < len(s) && s[i+1] == '-' {
				i++
			}
			wantEnd = true
		case c == '<' && placeholderWord.MatchString(s[i:]):
			// <file>: a placeholder the reader fills in, as pages write
			// them, not a redirection.
			m := placeholderWord.FindString(s[i:])
			word.WriteString(m)
			i += len(m) - 1
			inWord = true
		case c == '>' || c == '<':
			// 2> and &> name a stream; the word so far was its number.
			if inWord && (word.String() == "2" || word.String() == "1") {
				word.Reset()
				inWord = false
			}
			flush()
			for i+1 < len(s) && (s[i+1] == '>' || s[i+1] == '&') {
				i++
			}
			redirect = true
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	flush()
	if wantEnd {
		return nil, hd, fmt.Errorf("<< without an end word in %q", s)
	}
	cmds[len(cmds)-1].Args = words
	return cmds, hd, nil
}
