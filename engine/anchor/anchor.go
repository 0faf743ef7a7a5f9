// Package anchor parses the anchor syntax of Kyverno pattern keys.
//
// An anchor wraps a map key in a pattern and changes how that key is matched:
//
//	(key)   condition: the rest of the map applies only if key matches
//	<(key)  global condition: the whole rule applies only if key matches
//	=(key)  equality: if key is present it must match
//	^(key)  existence: at least one list element must match
//	X(key)  negation: key must be absent
//	+(key)  add if not present (mutate only)
//
// A key is an anchor when, after trimming spaces, it matches
// ^([+<=X^])?\((.+)\)$ (validate-semantics.md §2). The package knows only
// the syntax; what each anchor does is up to engine/pattern (validate) and
// engine/mutate.
package anchor

import (
	"fmt"
	"strings"
)

// Kind is the type of an anchor.
type Kind uint8

// Anchor kinds. The zero Kind is no anchor.
const (
	None      Kind = iota
	Condition      // (key)
	Global         // <(key)
	Equality       // =(key)
	Existence      // ^(key)
	Negation       // X(key)
	Add            // +(key)
)

// prefixes maps each kind to the characters written before its '('.
var prefixes = [...]string{None: "", Condition: "", Global: "<", Equality: "=", Existence: "^", Negation: "X", Add: "+"}

// String names the kind as Kyverno's docs do.
func (k Kind) String() string {
	switch k {
	case Condition:
		return "condition"
	case Global:
		return "global"
	case Equality:
		return "equality"
	case Existence:
		return "existence"
	case Negation:
		return "negation"
	case Add:
		return "add"
	}
	return "none"
}

// Anchor is a parsed anchor key.
type Anchor struct {
	Kind Kind
	// Key is the resource key inside the parentheses, untrimmed.
	Key string
}

// String writes the anchor back in pattern syntax, e.g. "=(image)".
func (a Anchor) String() string { return Build(a.Kind, a.Key) }

// Build writes key wrapped in the anchor of kind k; for None it returns key.
func Build(k Kind, key string) string {
	if k == None || int(k) >= len(prefixes) {
		return key
	}
	return prefixes[k] + "(" + key + ")"
}

// Parse reports whether key is an anchor and, if so, its kind and inner key.
// It does not allocate.
func Parse(key string) (Anchor, bool) {
	k := strings.TrimSpace(key)
	if len(k) < 3 || k[len(k)-1] != ')' {
		return Anchor{}, false
	}
	kind := Condition
	inner := k[1 : len(k)-1]
	switch k[0] {
	case '(':
	case '<', '=', '^', 'X', '+':
		if k[1] != '(' {
			return Anchor{}, false
		}
		kind = kindOf(k[0])
		inner = k[2 : len(k)-1]
	default:
		return Anchor{}, false
	}
	if inner == "" {
		return Anchor{}, false
	}
	return Anchor{Kind: kind, Key: inner}, true
}

func kindOf(prefix byte) Kind {
	switch prefix {
	case '<':
		return Global
	case '=':
		return Equality
	case '^':
		return Existence
	case 'X':
		return Negation
	case '+':
		return Add
	}
	return Condition
}

// KindOf returns the anchor kind of key, or None.
func KindOf(key string) Kind {
	a, _ := Parse(key)
	return a.Kind
}

// Strip returns the key inside an anchor, or key itself when it is not one.
func Strip(key string) string {
	if a, ok := Parse(key); ok {
		return a.Key
	}
	return key
}

// IsCondition reports whether key is a (key) condition anchor.
func IsCondition(key string) bool { return KindOf(key) == Condition }

// IsGlobal reports whether key is a <(key) global anchor.
func IsGlobal(key string) bool { return KindOf(key) == Global }

// IsEquality reports whether key is an =(key) equality anchor.
func IsEquality(key string) bool { return KindOf(key) == Equality }

// IsExistence reports whether key is a ^(key) existence anchor.
func IsExistence(key string) bool { return KindOf(key) == Existence }

// IsNegation reports whether key is an X(key) negation anchor.
func IsNegation(key string) bool { return KindOf(key) == Negation }

// IsAdd reports whether key is a +(key) add-if-not-present anchor.
func IsAdd(key string) bool { return KindOf(key) == Add }

// Malformed reports a key that is written like an anchor but is not one,
// such as "~(x)" (`unknown anchor "~(x)"`) or "()" (`empty anchor "()"`). Such keys are matched
// literally by Kyverno, which is almost never what the author meant, so the
// policy compiler rejects them. Keys that merely contain parentheses further
// in, like "abc(x)", are left alone: they are not anchor-shaped.
func Malformed(key string) error {
	if _, ok := Parse(key); ok {
		return nil
	}
	k := strings.TrimSpace(key)
	if !strings.HasSuffix(k, ")") {
		return nil
	}
	open := strings.IndexByte(k, '(')
	if open < 0 {
		return nil
	}
	prefix := k[:open]
	if len([]rune(prefix)) > 1 {
		return nil
	}
	if k[open+1:len(k)-1] == "" {
		return fmt.Errorf("empty anchor %q", key)
	}
	return fmt.Errorf("unknown anchor %q", key)
}
