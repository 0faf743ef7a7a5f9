package variables

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// referenceOperators are the pattern operators a reference may carry; they
// are kept in front of the referenced value. Longest first.
var referenceOperators = []string{">=", "<=", ">", "<", "!"}

// references substitutes the $(...) references of one string with values
// from the document being substituted. A reference without an operator must
// point at a string; with an operator, numbers are rendered too.
func (s *substituter) references(value string, key bool) (any, error) {
	matches := referencePattern.FindAllStringSubmatchIndex(value, -1)
	var b strings.Builder
	last := 0
	for _, m := range matches {
		start, end := m[4], m[5]
		ref := value[start:end]
		text, err := s.resolveReference(ref)
		if err != nil {
			return nil, &Error{Variable: ref, Path: s.pointer(), Err: err}
		}
		b.WriteString(value[last:start])
		b.WriteString(text)
		last = end
	}
	b.WriteString(value[last:])
	out := b.String()
	if strings.Contains(out, `\$(`) {
		out = escapedReferencePattern.ReplaceAllStringFunc(out, func(m string) string { return m[1:] })
	}
	return out, nil
}

func (s *substituter) resolveReference(ref string) (string, error) {
	p := ref[2 : len(ref)-1] // strip "$(" and ")"
	op := ""
	for _, o := range referenceOperators {
		if strings.HasPrefix(p, o) {
			op, p = o, p[len(o):]
			break
		}
	}
	if p == "" {
		return "", errors.New("expected path, found empty reference")
	}
	here := formatPointer(append(append([]segment{}, s.base...), s.path...))
	target := p
	if !path.IsAbs(p) {
		target = path.Join(here, p)
	}
	val, ok := s.lookup(target)
	if !ok {
		return "", fmt.Errorf("path %s not found", target)
	}
	if op == "" {
		str, isString := val.(string)
		if !isString {
			return "", fmt.Errorf("referenced value at %s is %T, not a string", target, val)
		}
		return str, nil
	}
	switch v := val.(type) {
	case string:
		return op + v, nil
	case float64:
		return op + strconv.FormatFloat(v, 'f', 6, 64), nil
	case int:
		return op + strconv.Itoa(v), nil
	case int64:
		return op + strconv.FormatInt(v, 10), nil
	}
	return "", fmt.Errorf("incorrect expression: operator %s does not match with value %v", op, val)
}

// lookup finds the value at an absolute pointer in the document, which sits
// at the base path. Keys match with their anchors removed.
func (s *substituter) lookup(pointer string) (any, bool) {
	segs := parsePointer(pointer)
	if len(segs) < len(s.base) {
		return nil, false
	}
	for i, b := range s.base {
		if segs[i].String() != b.String() {
			return nil, false
		}
	}
	cur := s.refRoot
	for _, seg := range segs[len(s.base):] {
		switch t := cur.(type) {
		case map[string]any:
			next, found := t[seg.key]
			if !found {
				for k, v := range t {
					if stripAnchor(k) == seg.key {
						next, found = v, true
						break
					}
				}
			}
			if !found {
				return nil, false
			}
			cur = next
		case []any:
			if !seg.isIndex || seg.index >= len(t) {
				return nil, false
			}
			cur = t[seg.index]
		default:
			return nil, false
		}
	}
	return cur, true
}
