package mutate

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/charter-dev/charter/engine/anchor"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The values of `(k)` and `<(k)` anchors are validate patterns (spec §2.2 step 2,
// validate-semantics §1-§4). A condition holds only when the pattern passes; a
// pattern that fails or skips does not hold. This is a compact private matcher for
// that boolean question; engine/pattern owns the full validate semantics with
// messages and paths.
//
// Not covered here (rare in mutate conditions): wildcard expansion of label and
// annotation keys in the pattern.

type verdict int

const (
	pass verdict = iota
	skip         // a conditional anchor inside the pattern was not met
	fail
)

// conditionHolds reports whether value satisfies pattern.
func conditionHolds(pattern, value any) bool {
	return matchPattern(pattern, value) == pass
}

func matchPattern(pattern, value any) verdict {
	switch p := pattern.(type) {
	case map[string]any:
		v, ok := value.(map[string]any)
		if !ok {
			return fail
		}
		return matchMap(p, v)
	case []any:
		return matchList(p, value)
	}
	if l, ok := value.([]any); ok {
		for _, e := range l {
			if !matchScalar(pattern, e) {
				return fail
			}
		}
		return pass
	}
	if matchScalar(pattern, value) {
		return pass
	}
	return fail
}

func matchMap(p, v map[string]any) verdict {
	anchorsHeld := false
	for key, sub := range p {
		a, isAnchor := anchor.Parse(key)
		kind, k := a.Kind, a.Key
		if !isAnchor {
			continue
		}
		rv, present := v[k]
		switch kind {
		case anchor.Condition:
			if !present || matchPattern(sub, rv) != pass {
				return skip
			}
			anchorsHeld = true
		case anchor.Global:
			if present && matchPattern(sub, rv) != pass {
				return skip
			}
		case anchor.Equality:
			if present && matchPattern(sub, rv) != pass {
				return fail
			}
		case anchor.Negation:
			if present {
				return fail
			}
		case anchor.Existence:
			if present && !existsIn(sub, rv) {
				return fail
			}
		}
	}
	for key, sub := range p {
		if kind := anchor.KindOf(key); kind != anchor.None && kind != anchor.Add {
			continue
		}
		rv, present := v[key]
		if s, ok := sub.(string); ok && s == "*" {
			if !present || rv == nil {
				return fail
			}
			continue
		}
		switch matchPattern(sub, rv) {
		case fail:
			return fail
		case skip:
			if !anchorsHeld {
				return skip
			}
		}
	}
	return pass
}

func existsIn(pattern, value any) bool {
	pl, ok := pattern.([]any)
	vl, ok2 := value.([]any)
	if !ok || !ok2 {
		return false
	}
	for _, pe := range pl {
		found := false
		for _, ve := range vl {
			if matchPattern(pe, ve) == pass {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func matchList(p []any, value any) verdict {
	v, ok := value.([]any)
	if !ok || len(p) == 0 {
		return fail
	}
	switch p[0].(type) {
	case map[string]any:
		if len(v) == 0 {
			return pass
		}
		skipped := 0
		for _, e := range v {
			switch matchPattern(p[0], e) {
			case fail:
				return fail
			case skip:
				skipped++
			}
		}
		if skipped == len(v) {
			return skip
		}
		return pass
	case []any:
		if len(v) < len(p) {
			return fail
		}
		for i := range p {
			if r := matchPattern(p[i], v[i]); r != pass {
				return r
			}
		}
		return pass
	}
	for _, e := range v {
		if !matchScalar(p[0], e) {
			return fail
		}
	}
	return pass
}

func matchScalar(pattern, value any) bool {
	switch p := pattern.(type) {
	case nil:
		switch v := value.(type) {
		case nil:
			return true
		case string:
			return v == ""
		case bool:
			return !v
		}
		f, ok := toFloat(value)
		return ok && f == 0
	case bool:
		v, ok := value.(bool)
		return ok && v == p
	case string:
		if s, ok := value.(string); ok && s == p {
			return true
		}
		for _, alt := range strings.Split(p, "|") {
			all := true
			for _, part := range strings.Split(alt, "&") {
				if !matchOperand(strings.TrimSpace(part), value) {
					all = false
					break
				}
			}
			if all {
				return true
			}
		}
		return false
	case map[string]any:
		_, ok := value.(map[string]any)
		return ok
	case []any:
		return false
	}
	pf, ok := toFloat(pattern)
	if !ok {
		return false
	}
	if s, ok := value.(string); ok {
		f, err := strconv.ParseFloat(s, 64)
		return err == nil && f == pf
	}
	vf, ok := toFloat(value)
	return ok && vf == pf
}

var rangePattern = regexp.MustCompile(`^([+-]?\d+(?:\.\d+)?[A-Za-z]*)(!?-)([+-]?\d+(?:\.\d+)?[A-Za-z]*)$`)

// matchOperand evaluates one `OP operand` part of a string pattern.
func matchOperand(part string, value any) bool {
	if len(part) >= 2 {
		for _, op := range []string{">=", "<=", ">", "<", "!"} {
			if strings.HasPrefix(part, op) {
				return compare(op, strings.TrimSpace(part[len(op):]), value)
			}
		}
		if m := rangePattern.FindStringSubmatch(part); m != nil {
			if m[2] == "-" {
				return compare(">=", m[1], value) && compare("<=", m[3], value)
			}
			return compare("<", m[1], value) || compare(">", m[3], value)
		}
	}
	return compare("==", part, value)
}

func compare(op, operand string, value any) bool {
	numeric := scalarString(value, "0")
	if d, err := time.ParseDuration(operand); err == nil {
		if vd, err := time.ParseDuration(numeric); err == nil {
			return ordered(op, compareInts(int64(vd), int64(d)))
		}
	}
	if q, err := resource.ParseQuantity(operand); err == nil {
		if vq, err := resource.ParseQuantity(numeric); err == nil {
			return ordered(op, vq.Cmp(q))
		}
	}
	if value == nil {
		return false
	}
	s := scalarString(value, "")
	if f, ok := value.(float64); ok && f != float64(int64(f)) {
		s = fmt.Sprintf("%E", f)
	}
	switch op {
	case "==":
		return wildcardMatch(operand, s)
	case "!":
		return !wildcardMatch(operand, s)
	}
	return false
}

func ordered(op string, cmp int) bool {
	switch op {
	case ">=":
		return cmp >= 0
	case "<=":
		return cmp <= 0
	case ">":
		return cmp > 0
	case "<":
		return cmp < 0
	case "!":
		return cmp != 0
	}
	return cmp == 0
}

func compareInts(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func scalarString(value any, ifNil string) string {
	switch v := value.(type) {
	case nil:
		return ifNil
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(v), 'f', -1, 32)
	}
	if i, ok := asInt64(value); ok {
		return strconv.FormatInt(i, 10)
	}
	return fmt.Sprint(value)
}

func toFloat(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, true
	case float32:
		return float64(t), true
	}
	if i, ok := asInt64(v); ok {
		return float64(i), true
	}
	return 0, false
}

// wildcardMatch matches s against a pattern where `*` is any run of characters and
// `?` exactly one.
func wildcardMatch(pattern, s string) bool {
	p, r := []rune(pattern), []rune(s)
	pi, si, star, mark := 0, 0, -1, 0
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
