package convert

import (
	"strconv"
	"strings"
)

// expr is a CEL expression under construction. prec is the precedence of
// its outermost operator, so that composing expressions adds parentheses
// only where CEL needs them, and true/false stay recognisable for constant
// folding: the converter builds many conjunctions whose parts are known in
// advance (a key that cannot skip, an anchor with nothing to check).
type expr struct {
	s    string
	prec int
}

const (
	precTernary = iota
	precOr
	precAnd
	precRel
	precAdd
	precUnary
	precAtom
)

var (
	celTrue  = expr{"true", precAtom}
	celFalse = expr{"false", precAtom}
)

func atom(s string) expr { return expr{s, precAtom} }

func (e expr) isTrue() bool   { return e.s == "true" }
func (e expr) isFalse() bool  { return e.s == "false" }
func (e expr) String() string { return e.s }

// at renders e for a position that needs precedence p or tighter.
func (e expr) at(p int) string {
	if e.prec < p {
		return "(" + e.s + ")"
	}
	return e.s
}

func and(parts ...expr) expr {
	var kept []string
	for _, p := range parts {
		switch {
		case p.isFalse():
			return celFalse
		case p.isTrue():
			continue
		}
		kept = append(kept, p.at(precAnd))
	}
	switch len(kept) {
	case 0:
		return celTrue
	case 1:
		return parse1(kept[0])
	}
	return expr{strings.Join(kept, " && "), precAnd}
}

func or(parts ...expr) expr {
	var kept []string
	for _, p := range parts {
		switch {
		case p.isTrue():
			return celTrue
		case p.isFalse():
			continue
		}
		kept = append(kept, p.at(precOr))
	}
	switch len(kept) {
	case 0:
		return celFalse
	case 1:
		return parse1(kept[0])
	}
	return expr{strings.Join(kept, " || "), precOr}
}

// parse1 undoes the parentheses a single survivor of and/or got.
func parse1(s string) expr {
	if strings.HasPrefix(s, "(") && strings.HasSuffix(s, ")") && balanced(s[1:len(s)-1]) {
		inner := s[1 : len(s)-1]
		return expr{inner, guessPrec(inner)}
	}
	return expr{s, guessPrec(s)}
}

// balanced reports whether s has no parenthesis closed before it opened,
// so that "(a) || (b)" is not mistaken for one parenthesised expression.
func balanced(s string) bool {
	depth := 0
	inQuote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuote != 0:
			if c == '\\' {
				i++
			} else if c == inQuote {
				inQuote = 0
			}
		case c == '\'' || c == '"':
			inQuote = c
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth < 0 {
				return false
			}
		}
	}
	return depth == 0
}

// guessPrec finds the loosest operator outside parentheses and quotes.
func guessPrec(s string) int {
	depth, inQuote, p := 0, byte(0), precAtom
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuote != 0:
			if c == '\\' {
				i++
			} else if c == inQuote {
				inQuote = 0
			}
			continue
		case c == '\'' || c == '"':
			inQuote = c
			continue
		case c == '(' || c == '[' || c == '{':
			depth++
			continue
		case c == ')' || c == ']' || c == '}':
			depth--
			continue
		}
		if depth > 0 {
			continue
		}
		rest := s[i:]
		switch {
		case c == '?':
			p = min(p, precTernary)
		case strings.HasPrefix(rest, "||"):
			p = min(p, precOr)
			i++
		case strings.HasPrefix(rest, "&&"):
			p = min(p, precAnd)
			i++
		case strings.HasPrefix(rest, "==") || strings.HasPrefix(rest, "!=") || strings.HasPrefix(rest, "<=") || strings.HasPrefix(rest, ">="):
			p = min(p, precRel)
			i++
		case c == '<' || c == '>' || strings.HasPrefix(rest, " in "):
			p = min(p, precRel)
		case (c == '+' || c == '-') && i > 0:
			p = min(p, precAdd)
		case c == '!' && i == 0:
			p = min(p, precUnary)
		}
	}
	return p
}

func not(e expr) expr {
	switch {
	case e.isTrue():
		return celFalse
	case e.isFalse():
		return celTrue
	}
	if strings.HasPrefix(e.s, "!") && e.prec == precUnary {
		inner := e.s[1:]
		return parse1(inner)
	}
	// Negate a comparison in place rather than wrapping it: !(a == b) is
	// a != b.
	if e.prec == precRel {
		for _, swap := range [][2]string{{" == ", " != "}, {" != ", " == "}} {
			if strings.Count(e.s, swap[0]) == 1 && !strings.ContainsAny(e.s, "<>") && topLevel(e.s, swap[0]) {
				return expr{strings.Replace(e.s, swap[0], swap[1], 1), precRel}
			}
		}
	}
	return expr{"!" + e.at(precUnary), precUnary}
}

// topLevel reports whether op occurs outside parentheses and quotes.
func topLevel(s, op string) bool {
	depth, inQuote := 0, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuote != 0:
			if c == '\\' {
				i++
			} else if c == inQuote {
				inQuote = 0
			}
			continue
		case c == '\'' || c == '"':
			inQuote = c
			continue
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		}
		if depth == 0 && strings.HasPrefix(s[i:], op) {
			return true
		}
	}
	return false
}

// implies is "if c then e", written as CEL reads best: !c || e.
func implies(c, e expr) expr { return or(not(c), e) }

func rel(a expr, op string, b expr) expr {
	return expr{a.at(precAdd) + " " + op + " " + b.at(precAdd), precRel}
}

func ternary(c, a, b expr) expr {
	if c.isTrue() {
		return a
	}
	if c.isFalse() {
		return b
	}
	if a.isTrue() {
		return or(c, b)
	}
	if b.isFalse() {
		return and(c, a)
	}
	return expr{c.at(precOr) + " ? " + a.at(precOr) + " : " + b.at(precTernary), precTernary}
}

func call(recv expr, method string, args ...expr) expr {
	ss := make([]string, len(args))
	for i, a := range args {
		ss[i] = a.s
	}
	return atom(recv.at(precAtom) + "." + method + "(" + strings.Join(ss, ", ") + ")")
}

func fn(name string, args ...expr) expr {
	ss := make([]string, len(args))
	for i, a := range args {
		ss[i] = a.s
	}
	return atom(name + "(" + strings.Join(ss, ", ") + ")")
}

// macro renders list.all(v, body) and friends.
func macro(list expr, name, v string, body expr) expr {
	return atom(list.at(precAtom) + "." + name + "(" + v + ", " + body.s + ")")
}

// str is a CEL string literal.
func str(s string) expr {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch r {
		case '\'':
			b.WriteString(`\'`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return atom(b.String())
}

func strList(ss []string) expr {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = str(s).s
	}
	return atom("[" + strings.Join(parts, ", ") + "]")
}

// literal renders a decoded JSON scalar as CEL.
func literal(v any) (expr, bool) {
	switch x := v.(type) {
	case nil:
		return atom("null"), true
	case bool:
		if x {
			return celTrue, true
		}
		return celFalse, true
	case string:
		return str(x), true
	case float64:
		if x == float64(int64(x)) {
			return atom(strconv.FormatInt(int64(x), 10)), true
		}
		return atom(strconv.FormatFloat(x, 'g', -1, 64)), true
	case int64:
		return atom(strconv.FormatInt(x, 10)), true
	case int:
		return atom(strconv.Itoa(x)), true
	}
	return expr{}, false
}

// field selects key from e: e.key when key is a CEL identifier, else
// e['key'].
func field(e expr, key string) expr {
	if isIdent(key) {
		return atom(e.at(precAtom) + "." + key)
	}
	return atom(e.at(precAtom) + "[" + str(key).s + "]")
}

// has tests key's presence in e: has(e.key), or 'key' in e.
func has(e expr, key string) expr {
	if isIdent(key) {
		return fn("has", atom(e.at(precAtom)+"."+key))
	}
	return expr{str(key).s + " in " + e.at(precAdd), precRel}
}

var celReserved = map[string]bool{
	"true": true, "false": true, "null": true, "in": true, "as": true, "break": true, "const": true,
	"continue": true, "else": true, "for": true, "function": true, "if": true, "import": true,
	"let": true, "loop": true, "package": true, "namespace": true, "return": true, "var": true,
	"void": true, "while": true,
}

func isIdent(s string) bool {
	if s == "" || celReserved[s] {
		return false
	}
	for i, r := range s {
		if r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9') {
			continue
		}
		return false
	}
	return true
}
