// Package pattern matches resources against Kyverno validate patterns.
//
// A pattern is a JSON-like tree (map[string]any, []any, string, float64,
// bool, nil) written in a rule's validate.pattern or validate.anyPattern. The
// package implements validate-semantics.md §1–§5: the walk over maps and
// arrays, the anchors (conditional, global, equality, existence, negation),
// wildcard label and annotation keys, and the scalar grammar (operators,
// ranges, alternation, quantities, durations, wildcards).
//
// The package is pure: no I/O, no goroutines, no logging. Variables must be
// substituted before a pattern is compiled or matched.
//
// Typical use by the engine:
//
//	c, err := pattern.Compile(rule.Validate.Pattern) // at policy compile time
//	...
//	if e := c.Validate(resource); e != nil {
//		switch e.Kind {
//		case pattern.Fail:    // "validation error: ... rule X failed at path " + e.Path
//		case pattern.Skip:    // rule skipped, e.Msg says why
//		case pattern.Invalid: // rule error: "... rule X execution error: " + e.Msg
//		}
//	}
package pattern
