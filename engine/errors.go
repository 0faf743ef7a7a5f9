package engine

import (
	"fmt"
	"strings"
)

// CompileError is one fault found by Compile, naming the policy, the field
// path and the fault:
//
//	ClusterPolicy "x": spec.rules[2].validate.pattern.spec.containers[0]: unknown anchor "~(x)"
type CompileError struct {
	// Kind is ClusterPolicy, Policy or PolicyException.
	Kind string
	// Name is "name" or "namespace/name".
	Name string
	// Field is the path inside the object, e.g. spec.rules[2].validate.pattern.
	Field string
	// Fault says what is wrong.
	Fault string
}

func (e *CompileError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s %q: %s", e.Kind, e.Name, e.Fault)
	}
	return fmt.Sprintf("%s %q: %s: %s", e.Kind, e.Name, e.Field, e.Fault)
}

// CompileErrors is every fault Compile found; Compile returns it as its error
// when it is not empty.
type CompileErrors []*CompileError

func (es CompileErrors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// For returns the faults of one object ("name" or "namespace/name").
func (es CompileErrors) For(kind, name string) CompileErrors {
	var out CompileErrors
	for _, e := range es {
		if e.Kind == kind && e.Name == name {
			out = append(out, e)
		}
	}
	return out
}
