package celenv

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
)

// random(regex) of Kyverno's CEL libraries (cel-policy-types.md §4): a
// string the regex matches. The generator walks the regex's syntax tree
// (regexp/syntax, the parser regexp itself uses), so every construct Go's
// regexp accepts is understood the same way; a general-purpose fake-data
// library would bring megabytes of word lists into the CLI for this one
// function.

// randomRepeatSpan bounds unbounded repetitions (*, +, {n,}): at most this
// many copies past the minimum.
const randomRepeatSpan = 8

// randomRegexTries is how many candidates are drawn before giving up:
// assertions (\b, ^ and $ inside the pattern) are not generated, only
// checked, so a draw may miss them.
const randomRegexTries = 32

// RandomMatching returns a random string that pattern matches.
func RandomMatching(pattern string) (string, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", fmt.Errorf("random: invalid regex %q: %w", pattern, err)
	}
	matcher, err := regexp.Compile(pattern)
	if err != nil {
		return "", fmt.Errorf("random: invalid regex %q: %w", pattern, err)
	}
	re = re.Simplify()
	for range randomRegexTries {
		var b strings.Builder
		if err := generateRegex(&b, re); err != nil {
			return "", fmt.Errorf("random: regex %q: %w", pattern, err)
		}
		if s := b.String(); matcher.MatchString(s) {
			return s, nil
		}
	}
	return "", fmt.Errorf("random: no string matching regex %q found in %d tries (its assertions may contradict each other)", pattern, randomRegexTries)
}

func generateRegex(b *strings.Builder, re *syntax.Regexp) error {
	switch re.Op {
	case syntax.OpNoMatch:
		return fmt.Errorf("%s matches nothing", re)
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		// Zero-width: checked by the matcher afterwards.
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 && RandomInt(2) == 0 {
				r = unicode.SimpleFold(r)
			}
			b.WriteRune(r)
		}
	case syntax.OpCharClass:
		r, err := randomRuneIn(re.Rune)
		if err != nil {
			return fmt.Errorf("%s: %w", re, err)
		}
		b.WriteRune(r)
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		b.WriteByte(byte(' ' + RandomInt('~'-' '+1)))
	case syntax.OpCapture:
		return generateRegex(b, re.Sub[0])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := repeatBounds(re)
		for range lo + RandomInt(hi-lo+1) {
			if err := generateRegex(b, re.Sub[0]); err != nil {
				return err
			}
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if err := generateRegex(b, sub); err != nil {
				return err
			}
		}
	case syntax.OpAlternate:
		return generateRegex(b, re.Sub[RandomInt(len(re.Sub))])
	default:
		return fmt.Errorf("unsupported regex construct %s", re)
	}
	return nil
}

func repeatBounds(re *syntax.Regexp) (lo, hi int) {
	switch re.Op {
	case syntax.OpStar:
		return 0, randomRepeatSpan
	case syntax.OpPlus:
		return 1, 1 + randomRepeatSpan
	case syntax.OpQuest:
		return 0, 1
	}
	lo, hi = re.Min, re.Max
	if hi < 0 {
		hi = lo + randomRepeatSpan
	}
	return lo, hi
}

// printableASCII is where a character class is drawn from first, so that
// [^a-z] gives "7" or "Q" rather than a rune from the far end of Unicode.
var printableASCII = []rune{' ', '~'}

// randomRuneIn draws a rune from a class given as sorted [lo, hi] pairs:
// from its printable ASCII part when it has one, else from the whole.
func randomRuneIn(class []rune) (rune, error) {
	if r, ok := drawRune(intersectRanges(class, printableASCII)); ok {
		return r, nil
	}
	if r, ok := drawRune(class); ok {
		return r, nil
	}
	return 0, fmt.Errorf("empty character class")
}

func intersectRanges(class, within []rune) []rune {
	var out []rune
	for i := 0; i+1 < len(class); i += 2 {
		lo, hi := max(class[i], within[0]), min(class[i+1], within[1])
		if lo <= hi {
			out = append(out, lo, hi)
		}
	}
	return out
}

func drawRune(class []rune) (rune, bool) {
	total := 0
	for i := 0; i+1 < len(class); i += 2 {
		total += int(class[i+1]-class[i]) + 1
	}
	if total == 0 {
		return 0, false
	}
	k := RandomInt(total)
	for i := 0; i+1 < len(class); i += 2 {
		n := int(class[i+1]-class[i]) + 1
		if k < n {
			return class[i] + rune(k), true
		}
		k -= n
	}
	return 0, false
}

// RandomInt is uniform in [0, n); n must be positive.
func RandomInt(n int) int {
	k, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		return 0
	}
	return int(k.Int64())
}
