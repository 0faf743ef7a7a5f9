package pattern

import "fmt"

// Kind classifies the outcome of matching a pattern.
type Kind uint8

const (
	// Pass means the resource satisfies the pattern. An *Error never has it;
	// it is the zero value so that AnyResult.Verdict can return it.
	Pass Kind = iota
	// Fail means the resource violates the pattern at Error.Path.
	Fail
	// Skip means a conditional (key) or global <(key) anchor was not
	// satisfied, so the rule does not apply to the resource.
	Skip
	// Invalid means the pattern could not be applied; Kyverno reports the rule
	// result as error ("execution error"). It happens when a failure has no
	// path (an array pattern longer than the resource array), or when the
	// resource fails while a (key) or ^(key) anchor key of the pattern was
	// found nowhere in the resource.
	Invalid
)

func (k Kind) String() string {
	switch k {
	case Pass:
		return "pass"
	case Fail:
		return "fail"
	case Skip:
		return "skip"
	case Invalid:
		return "error"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Error is why a resource did not pass a pattern.
type Error struct {
	Kind Kind
	// Path locates the failure in the resource, in Kyverno's form: slash
	// separated, with a leading and a trailing slash and anchors stripped,
	// e.g. "/spec/containers/1/image/". It is set for Fail; for Skip it tells
	// where the deciding anchor was, for information only; for Invalid it is
	// empty.
	Path string
	// Msg is Kyverno's message for the failure, e.g. "resource value 'b:latest'
	// does not match '!*:latest' at path /spec/containers/1/image/". Kyverno
	// prints it for Skip and Invalid results; for Fail it prints only Path.
	Msg string
}

func (e *Error) Error() string { return e.Msg }

// CompileError is a problem with a pattern found by Compile.
type CompileError struct {
	// Field is the path of the offending node inside the pattern, in field
	// path form ("spec.containers[0].image"); empty for the pattern root.
	Field string
	Msg   string
}

func (e *CompileError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}
