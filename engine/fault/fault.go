// Package fault holds the faults a policy compile finds: one Fault names
// the object, the field path and what is wrong; a List is every fault of a
// compile and is returned as its error. It is a leaf so that the engine
// root, each policy kind's package under engine/ and their callers (the
// kind table, status writers, the GitOps check) share one type.
package fault

import (
	"fmt"
	"strings"
)

// Fault is one fault found by a compile, naming the policy, the field path
// and the fault:
//
//	ClusterPolicy "x": spec.rules[2].validate.pattern.spec.containers[0]: unknown anchor "~(x)"
type Fault struct {
	// Kind is the object's kind: ClusterPolicy, Policy, PolicyException,
	// ValidatingPolicy, ...
	Kind string
	// Name is "name" or "namespace/name".
	Name string
	// Field is the path inside the object, e.g. spec.rules[2].validate.pattern.
	Field string
	// Fault says what is wrong.
	Fault string
}

func (e *Fault) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s %q: %s", e.Kind, e.Name, e.Fault)
	}
	return fmt.Sprintf("%s %q: %s: %s", e.Kind, e.Name, e.Field, e.Fault)
}

// List is every fault a compile found; a compile returns it as its error
// when it is not empty.
type List []*Fault

func (es List) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// For returns the faults of one object ("name" or "namespace/name").
func (es List) For(kind, name string) List {
	var out List
	for _, e := range es {
		if e.Kind == kind && e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// JoinPath appends a JSON key to a field path, quoting keys that would
// read ambiguously.
func JoinPath(path, key string) string {
	if strings.ContainsAny(key, ".[]") || key == "" {
		return fmt.Sprintf("%s[%q]", path, key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// Parse makes a List of faults written "<field>: <what>" (the api types'
// Validate methods write them so) for one object; a fault without a field
// is kept whole. nil when there are none.
func Parse(kind, name string, faults []string) List {
	var out List
	for _, f := range faults {
		field, what, ok := strings.Cut(f, ": ")
		if !ok {
			field, what = "", f
		}
		out = append(out, &Fault{Kind: kind, Name: name, Field: field, Fault: what})
	}
	return out
}
