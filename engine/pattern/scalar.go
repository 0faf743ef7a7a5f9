package pattern

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/charter-dev/charter/engine/wildcard"
)

// MatchValue reports whether a single resource value satisfies a scalar
// pattern (validate-semantics.md §3). It does not walk arrays or maps: a map
// pattern only asks for a map value, and an array pattern never matches.
// Patterns used repeatedly should be compiled once with Compile.
func MatchValue(value, pattern any) bool {
	s, ok := compileScalar(pattern)
	if !ok {
		if _, isMap := pattern.(map[string]any); isMap {
			_, ok := value.(map[string]any)
			return ok
		}
		return false
	}
	return s.match(value)
}

type scalarKind uint8

const (
	scalarNull scalarKind = iota
	scalarBool
	scalarInt
	scalarFloat
	scalarString
)

// scalar is a compiled scalar pattern.
type scalar struct {
	kind scalarKind
	b    bool
	i    int64
	f    float64
	s    *stringPattern
}

// compileScalar compiles a string, number, bool or null pattern; ok is false
// for any other type.
func compileScalar(p any) (scalar, bool) {
	switch v := p.(type) {
	case nil:
		return scalar{kind: scalarNull}, true
	case bool:
		return scalar{kind: scalarBool, b: v}, true
	case float64:
		return scalar{kind: scalarFloat, f: v}, true
	case int64:
		return scalar{kind: scalarInt, i: v}, true
	case int:
		return scalar{kind: scalarInt, i: int64(v)}, true
	case int32:
		return scalar{kind: scalarInt, i: int64(v)}, true
	case string:
		return scalar{kind: scalarString, s: parseStringPattern(v)}, true
	}
	return scalar{}, false
}

func (s *scalar) match(value any) bool {
	switch s.kind {
	case scalarNull:
		return matchNull(value)
	case scalarBool:
		b, ok := value.(bool)
		return ok && b == s.b
	case scalarInt:
		return matchInt(value, s.i)
	case scalarFloat:
		return matchFloat(value, s.f)
	case scalarString:
		return s.s.match(value)
	}
	return false
}

// matchNull: a null pattern accepts an absent value and every zero value.
func matchNull(value any) bool {
	switch v := value.(type) {
	case nil:
		return true
	case float64:
		return v == 0
	case int64:
		return v == 0
	case int:
		return v == 0
	case string:
		return v == ""
	case bool:
		return !v
	}
	return false
}

// matchInt: an integer pattern accepts an equal integer, a float without
// fraction, or a string holding the integer in decimal.
func matchInt(value any, p int64) bool {
	switch v := value.(type) {
	case int64:
		return v == p
	case int:
		return int64(v) == p
	case float64:
		return v == math.Trunc(v) && int64(v) == p
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return err == nil && n == p
	}
	return false
}

// matchFloat: a float pattern accepts an equal float, an integer when the
// pattern has no fraction, or a numeric string.
func matchFloat(value any, p float64) bool {
	switch v := value.(type) {
	case float64:
		return v == p
	case int64:
		return p == math.Trunc(p) && int64(p) == v
	case int:
		return p == math.Trunc(p) && int(p) == v
	case string:
		f, err := strconv.ParseFloat(v, 64)
		return err == nil && f == p
	}
	return false
}

// op is a comparison operator of the string pattern grammar.
type op uint8

const (
	opEqual op = iota
	opNotEqual
	opMore
	opLess
	opMoreEqual
	opLessEqual
	opInRange    // A-B: >= A and <= B
	opNotInRange // A!-B: < A or > B
)

var opText = [...]string{opEqual: "", opNotEqual: "!", opMore: ">", opLess: "<", opMoreEqual: ">=", opLessEqual: "<="}

// The range forms: numbers with an optional fraction and unit suffix on both
// sides. The sign class also admits '|', as Kyverno's does; it can never
// occur here because alternatives are split on '|' first.
var (
	inRangeRE    = regexp.MustCompile(`^([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)-([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)$`)
	notInRangeRE = regexp.MustCompile(`^([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)!-([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)$`)
)

// stringPattern is a parsed string pattern: alternatives separated by '|',
// each a conjunction of comparisons separated by '&'.
type stringPattern struct {
	raw  string
	alts [][]comparison
}

// comparison is one "OP operand" part, with the operand pre-parsed as a
// duration and as a quantity where it parses.
type comparison struct {
	op      op
	operand string
	dur     time.Duration
	durOK   bool
	qty     resource.Quantity
	qtyOK   bool
	// lo and hi are the two bounds of opInRange and opNotInRange.
	lo, hi *comparison
}

func parseStringPattern(raw string) *stringPattern {
	sp := &stringPattern{raw: raw}
	for _, alt := range strings.Split(raw, "|") {
		alt = strings.Trim(alt, " ")
		var and []comparison
		for _, part := range strings.Split(alt, "&") {
			and = append(and, parseComparison(strings.Trim(part, " ")))
		}
		sp.alts = append(sp.alts, and)
	}
	return sp
}

// parseComparison detects the operator of one part in Kyverno's order:
// >=, <=, >, <, !, then A!-B and A-B, else equality. A part shorter than two
// bytes is always an equality.
func parseComparison(part string) comparison {
	if len(part) < 2 {
		return newComparison(opEqual, part)
	}
	for _, o := range [...]op{opMoreEqual, opLessEqual, opMore, opLess, opNotEqual} {
		if strings.HasPrefix(part, opText[o]) {
			return newComparison(o, strings.TrimSpace(part[len(opText[o]):]))
		}
	}
	if !mayBeRange(part) {
		return newComparison(opEqual, strings.TrimSpace(part))
	}
	if m := notInRangeRE.FindStringSubmatch(part); m != nil {
		lo, hi := newComparison(opLess, m[1]), newComparison(opMore, m[2])
		return comparison{op: opNotInRange, operand: part, lo: &lo, hi: &hi}
	}
	if m := inRangeRE.FindStringSubmatch(part); m != nil {
		lo, hi := newComparison(opMoreEqual, m[1]), newComparison(opLessEqual, m[2])
		return comparison{op: opInRange, operand: part, lo: &lo, hi: &hi}
	}
	return newComparison(opEqual, strings.TrimSpace(part))
}

// mayBeRange is a cheap test for the range regular expressions: they need a
// digit or sign first and a '-' further on.
func mayBeRange(s string) bool {
	c := s[0]
	return (c >= '0' && c <= '9' || c == '-' || c == '+' || c == '|') && strings.IndexByte(s[1:], '-') >= 0
}

func newComparison(o op, operand string) comparison {
	c := comparison{op: o, operand: operand}
	if d, err := time.ParseDuration(operand); err == nil {
		c.dur, c.durOK = d, true
	}
	if q, err := resource.ParseQuantity(operand); err == nil {
		c.qty, c.qtyOK = q, true
	}
	return c
}

func (sp *stringPattern) match(value any) bool {
	if s, ok := value.(string); ok && s == sp.raw {
		return true
	}
	for _, and := range sp.alts {
		ok := true
		for i := range and {
			if !and[i].match(value) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// match compares value with the operand as a duration if both parse as one,
// else as a quantity if both parse as one, else as a wildcard string (only
// equality and inequality; ordering a non-numeric string is always false).
func (c *comparison) match(value any) bool {
	switch c.op {
	case opInRange:
		return c.lo.match(value) && c.hi.match(value)
	case opNotInRange:
		return c.lo.match(value) || c.hi.match(value)
	}
	if c.durOK || c.qtyOK {
		if s, ok := numberString(value); ok {
			if c.durOK {
				if d, err := time.ParseDuration(s); err == nil {
					return c.op.holds(cmpDuration(d, c.dur))
				}
			}
			if c.qtyOK {
				if q, err := resource.ParseQuantity(s); err == nil {
					return c.op.holds(q.Cmp(c.qty))
				}
			}
		}
	}
	if c.op != opEqual && c.op != opNotEqual {
		return false
	}
	s, ok := wildcardString(value)
	if !ok {
		return false
	}
	return wildcard.Match(c.operand, s) == (c.op == opEqual)
}

// holds reports whether a three-way comparison result satisfies o.
func (o op) holds(cmp int) bool {
	switch o {
	case opEqual:
		return cmp == 0
	case opNotEqual:
		return cmp != 0
	case opMore:
		return cmp > 0
	case opLess:
		return cmp < 0
	case opMoreEqual:
		return cmp >= 0
	case opLessEqual:
		return cmp <= 0
	}
	return false
}

func cmpDuration(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// numberString renders a value for duration and quantity parsing. A missing
// value counts as "0", so numeric operators treat an absent field as zero.
// Floats use %f, as Kyverno does.
func numberString(value any) (string, bool) {
	switch v := value.(type) {
	case nil:
		return "0", true
	case string:
		return v, true
	case float64:
		return strconv.FormatFloat(v, 'f', 6, 64), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case int:
		return strconv.Itoa(v), true
	}
	return "", false
}

// wildcardString renders a value for wildcard comparison; floats use the %E
// form ("5E+00"), as Kyverno does, and nil does not compare.
func wildcardString(value any) (string, bool) {
	switch v := value.(type) {
	case string:
		return v, true
	case float64:
		return strconv.FormatFloat(v, 'E', -1, 64), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case int:
		return strconv.Itoa(v), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}
