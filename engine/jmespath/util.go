package jmespath

import (
	"fmt"
	"math"
)

// integer converts a numeric argument that must hold an integer value.
func integer(v any, pos int) (int, error) {
	switch t := v.(type) {
	case float64:
		if t != math.Trunc(t) || math.IsInf(t, 0) || math.IsNaN(t) {
			return 0, fmt.Errorf("argument %d must be an integer, got %v", pos, t)
		}
		return int(t), nil
	case int:
		return t, nil
	case int64:
		return int(t), nil
	}
	return 0, fmt.Errorf("argument %d must be a number, got %s", pos, typeName(v))
}

// number converts a JSON number, accepting Go integers defensively.
func number(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, true
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	case int32:
		return float64(t), true
	case float32:
		return float64(t), true
	}
	return 0, false
}

// typeName names a JSON value's type the way JMESPath's type() does.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	if _, ok := number(v); ok {
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// wildcardMatch matches s against a Kyverno wildcard pattern: '*' matches any
// run of characters (including none) and '?' exactly one character. There is
// no escaping. Matching is by rune and runs in O(len(p)*len(s)) worst case.
func wildcardMatch(pattern, s string) bool {
	p := []rune(pattern)
	r := []rune(s)
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(r) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == r[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
