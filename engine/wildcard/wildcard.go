// Package wildcard implements the glob matching Kyverno uses for names,
// namespaces, kinds, images, label keys and string patterns.
//
// The syntax is deliberately tiny: '*' matches any sequence of characters,
// including the empty one, and '?' matches exactly one character. There is
// no escape and no character class. Matching works on runes, not bytes, so
// '?' consumes one whole UTF-8 character; an invalid byte counts as one
// character (U+FFFD), as it does after a []rune conversion.
//
// These are the semantics of github.com/IGLOU-EU/go-wildcard v1.0.3, which
// Kyverno wraps (validate-semantics.md §3.3).
package wildcard

import (
	"strings"
	"unicode/utf8"
)

// Match reports whether s matches pattern. It does not allocate.
func Match(pattern, s string) bool {
	if pattern == "*" {
		return true
	}
	// Greedy matching with backtracking to the most recent '*' only. For
	// patterns made of literals, '?' and '*' this finds a match whenever one
	// exists: a later star can absorb anything an earlier star would have.
	var (
		p, i         int // positions in pattern and s
		starP, starI = -1, 0
	)
	for i < len(s) || p < len(pattern) {
		if p < len(pattern) {
			pr, pw := decode(pattern, p)
			switch pr {
			case '*':
				starP, starI = p, i
				p += pw
				continue
			case '?':
				if i < len(s) {
					_, sw := decode(s, i)
					p += pw
					i += sw
					continue
				}
			default:
				if i < len(s) {
					sr, sw := decode(s, i)
					if sr == pr {
						p += pw
						i += sw
						continue
					}
				}
			}
		}
		// Mismatch: let the last star swallow one more character of s.
		if starP < 0 || starI >= len(s) {
			return false
		}
		_, sw := decode(s, starI)
		starI += sw
		p, i = starP+1, starI
	}
	return true
}

// ContainsWildcard reports whether s holds '*' or '?', i.e. whether it must
// be matched with Match rather than compared for equality.
func ContainsWildcard(s string) bool {
	return strings.ContainsAny(s, "*?")
}

// decode returns the rune at s[i:] and its width, with ASCII fast-pathed.
func decode(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}
