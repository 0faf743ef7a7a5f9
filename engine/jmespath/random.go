package jmespath

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"strings"
)

const (
	// randomMaxRepeat bounds *, + and open-ended {n,} repetitions.
	randomMaxRepeat = 10
	// randomMaxLen bounds the generated string, so a{1000}{1000} fails
	// instead of allocating megabytes per call.
	randomMaxLen = 1 << 16
)

var errRandomTooLong = fmt.Errorf("generated string would exceed %d bytes", randomMaxLen)

// fnRandom generates a random string matching the regular expression.
func (e *env) fnRandom(a []any) (any, error) {
	re, err := syntax.Parse(a[0].(string), syntax.Perl)
	if err != nil {
		return nil, err
	}
	g := generator{intn: e.randIntn}
	if err := g.gen(re.Simplify()); err != nil {
		return nil, err
	}
	return g.b.String(), nil
}

type generator struct {
	intn func(int) int
	b    strings.Builder
}

// between returns a value in [lo, hi].
func (g *generator) between(lo, hi int) int {
	if hi <= lo {
		return lo
	}
	return lo + g.intn(hi-lo+1)
}

func (g *generator) gen(re *syntax.Regexp) error {
	if g.b.Len() > randomMaxLen {
		return errRandomTooLong
	}
	switch re.Op {
	case syntax.OpNoMatch:
		return errors.New("regular expression matches nothing")
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			g.b.WriteRune(r)
		}
	case syntax.OpCharClass:
		// Rune holds inclusive [lo, hi] pairs; pick a pair weighted by size.
		total := 0
		for i := 0; i+1 < len(re.Rune); i += 2 {
			total += int(re.Rune[i+1]-re.Rune[i]) + 1
		}
		if total == 0 {
			return errors.New("empty character class")
		}
		n := g.intn(total)
		for i := 0; i+1 < len(re.Rune); i += 2 {
			size := int(re.Rune[i+1]-re.Rune[i]) + 1
			if n < size {
				g.b.WriteRune(re.Rune[i] + rune(n))
				break
			}
			n -= size
		}
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		g.b.WriteByte(byte(g.between(0x21, 0x7e))) // printable ASCII
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
	case syntax.OpCapture:
		return g.gen(re.Sub[0])
	case syntax.OpStar:
		return g.repeat(re.Sub[0], 0, randomMaxRepeat)
	case syntax.OpPlus:
		return g.repeat(re.Sub[0], 1, randomMaxRepeat)
	case syntax.OpQuest:
		return g.repeat(re.Sub[0], 0, 1)
	case syntax.OpRepeat:
		hi := re.Max
		if hi < 0 {
			hi = re.Min + randomMaxRepeat
		}
		return g.repeat(re.Sub[0], re.Min, hi)
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if err := g.gen(sub); err != nil {
				return err
			}
		}
	case syntax.OpAlternate:
		return g.gen(re.Sub[g.intn(len(re.Sub))])
	default:
		return fmt.Errorf("unsupported regular expression operator %v", re.Op)
	}
	return nil
}

func (g *generator) repeat(re *syntax.Regexp, lo, hi int) error {
	for n := g.between(lo, hi); n > 0; n-- {
		if err := g.gen(re); err != nil {
			return err
		}
	}
	return nil
}
