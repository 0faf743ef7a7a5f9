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

func and(parts ...expr) expr { return fold(parts, celTrue, " && ", precAnd) }

func or(parts ...expr) expr { return fold(parts, celFalse, " || ", precOr) }

// fold joins parts with a logical operator whose identity is unit (true
// for &&, false for ||): units drop out, the other constant decides.
func fold(parts []expr, unit expr, op string, prec int) expr {
	var kept []expr
	for _, p := range parts {
		switch {
		case p.s == unit.s:
			continue
		case p.isTrue() || p.isFalse():
			return p
		}
		kept = append(kept, p)
	}
	switch len(kept) {
	case 0:
		return unit
	case 1:
		return kept[0]
	}
	ss := make([]string, len(kept))
	for i, k := range kept {
		ss[i] = k.at(prec)
	}
	return expr{strings.Join(ss, op), prec}
}

// scan calls visit for each byte of s outside quoted strings, with the
// bracket depth there; visit returns how many bytes to skip after it.
func scan(s string, visit func(i, depth int) int) {
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
			continue
		case c == ')' || c == ']' || c == '}':
			depth--
			continue
		}
		i += visit(i, depth)
	}
}

// enclosed reports whether s is one parenthesised group: "(a || b)" but
// not "(a) || (b)".
func enclosed(s string) bool {
	if !strings.HasPrefix(s, "(") || !strings.HasSuffix(s, ")") {
		return false
	}
	closes := 0
	scan(s[1:len(s)-1], func(i, depth int) int {
		if depth < 0 {
			closes++
		}
		return 0
	})
	return closes == 0 && strings.Count(s, "(") == strings.Count(s, ")")
}

// splitTopLevel splits s on op outside brackets and quotes.
func splitTopLevel(s, op string) []string {
	var parts []string
	start := 0
	scan(s, func(i, depth int) int {
		if depth == 0 && i >= start && strings.HasPrefix(s[i:], op) {
			parts = append(parts, s[start:i])
			start = i + len(op)
			return len(op) - 1
		}
		return 0
	})
	return append(parts, s[start:])
}

func not(e expr) expr {
	switch {
	case e.isTrue():
		return celFalse
	case e.isFalse():
		return celTrue
	}
	if e.prec == precUnary && strings.HasPrefix(e.s, "!") && enclosed(e.s[1:]) {
		return expr{e.s[2 : len(e.s)-1], precTernary}
	}
	// Negate a comparison in place rather than wrapping it: !(a == b) is
	// a != b.
	if e.prec == precRel {
		for _, swap := range [][2]string{{" == ", " != "}, {" != ", " == "}} {
			if strings.Count(e.s, swap[0]) == 1 && !strings.ContainsAny(e.s, "<>") && len(splitTopLevel(e.s, swap[0])) == 2 {
				return expr{strings.Replace(e.s, swap[0], swap[1], 1), precRel}
			}
		}
	}
	return expr{"!" + e.at(precUnary), precUnary}
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
