package mutate

import "github.com/charter-dev/charter/engine/pattern"

// conditionHolds reports whether value satisfies the validate pattern of a `(k)` or
// `<(k)` anchor (spec §2.2 step 2). Kyverno uses its validate matcher here; a pattern
// that fails, skips or cannot be applied does not hold.
func conditionHolds(p, value any) bool {
	return pattern.Validate(value, p) == nil
}
