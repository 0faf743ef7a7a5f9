package cpol

import (
	"github.com/charter-dev/charter/engine/pattern"
)

// compiledPattern is a pattern ready to match resources.
type compiledPattern struct{ c *pattern.Compiled }

type patternKind uint8

const (
	patternPass patternKind = iota
	patternFail
	patternSkip
	patternInvalid
)

type patternResult struct {
	kind patternKind
	path string
	msg  string
}

func compilePatternTree(p any) (*compiledPattern, error) {
	c, err := pattern.Compile(p)
	if err != nil {
		return nil, err
	}
	return &compiledPattern{c: c}, nil
}

// Validate matches the resource; a failure is reported by its path
// (patternFailMessage), so its message is not made (pattern.Verdict).
func (cp *compiledPattern) validate(resource map[string]any) patternResult {
	e := cp.c.Verdict(resource)
	if e == nil {
		return patternResult{kind: patternPass}
	}
	switch e.Kind {
	case pattern.Fail:
		return patternResult{kind: patternFail, path: e.Path}
	case pattern.Skip:
		return patternResult{kind: patternSkip, path: e.Path, msg: e.Msg}
	default:
		return patternResult{kind: patternInvalid, msg: e.Msg}
	}
}

// patternFieldPath appends the position of a pattern compile error to the
// pattern's field path.
func patternFieldPath(path string, err error) string {
	if ce, ok := err.(*pattern.CompileError); ok && ce.Field != "" {
		if ce.Field[0] == '[' {
			return path + ce.Field
		}
		return path + "." + ce.Field
	}
	return path
}

func patternFault(err error) string {
	if ce, ok := err.(*pattern.CompileError); ok {
		return ce.Msg
	}
	return err.Error()
}
