package pattern

// AnyResult is the outcome of validate.anyPattern (validate-semantics.md §5).
type AnyResult struct {
	// Passed is the index of the first pattern the resource satisfies, or -1.
	Passed int
	// Errors holds, in order, the outcome of every pattern tried before the
	// one that passed (all of them when none passed). Kyverno lists the
	// failures in its message as "rule NAME[i] failed at path PATH" (or
	// "rule NAME[i] failed: MSG" for an Invalid one) and the skips as
	// "rule NAME[i] skipped: MSG".
	Errors []IndexedError
}

// IndexedError is the failure of the anyPattern entry at Index.
type IndexedError struct {
	Index int
	*Error
}

// Verdict folds the result: Pass if a pattern passed or there were none;
// otherwise Fail if any pattern failed (Fail or Invalid), else Skip.
func (r AnyResult) Verdict() Kind {
	if r.Passed >= 0 || len(r.Errors) == 0 {
		return Pass
	}
	verdict := Skip
	for _, e := range r.Errors {
		if e.Kind != Skip {
			verdict = Fail
		}
	}
	return verdict
}

// ValidateAny evaluates anyPattern entries in order and stops at the first
// that passes.
func ValidateAny(resource any, patterns []*Compiled) AnyResult {
	r := AnyResult{Passed: -1}
	for i, p := range patterns {
		e := p.Validate(resource)
		if e == nil {
			r.Passed = i
			return r
		}
		r.Errors = append(r.Errors, IndexedError{Index: i, Error: e})
	}
	return r
}
