package review

import (
	"fmt"
	"strings"
)

// RefOf names an unstructured object.
func RefOf(obj map[string]any) ResourceRef {
	meta, _ := obj["metadata"].(map[string]any)
	ref := ResourceRef{}
	ref.APIVersion, _ = obj["apiVersion"].(string)
	ref.Kind, _ = obj["kind"].(string)
	ref.Namespace, _ = meta["namespace"].(string)
	ref.Name, _ = meta["name"].(string)
	return ref
}

// retargetError says a mutate-existing patch would write another object
// than the target it was given: its apiVersion, kind, namespace or name
// changed. The write is refused, whatever the policy's kind: the target was
// selected (and, for a namespaced policy, confined to its namespace) by
// its identity, and a patch that rewrote the identity would land on an
// object the selection never chose (a tenant's Policy relabelling
// another tenant's Namespace).
type retargetError struct {
	// Rule is the rule (for a MutatingPolicy, its synthetic rule, named
	// after the policy).
	Rule string
	// Read is the target as it was read.
	Read ResourceRef
	// Changes are the identity fields that differ, in the order
	// apiVersion, kind, namespace, name.
	Changes []identityChange
}

// identityChange is one identity field of an object and its two values.
type identityChange struct {
	Field    string
	From, To string
}

func (e *retargetError) Error() string {
	parts := make([]string, len(e.Changes))
	for i, c := range e.Changes {
		parts[i] = fmt.Sprintf("%s from %s to %s", c.Field, quoteEmpty(c.From), quoteEmpty(c.To))
	}
	return fmt.Sprintf("rule %s: the patch changes the target's %s; a mutate-existing patch may not change apiVersion, kind, name or namespace",
		e.Rule, strings.Join(parts, " and "))
}

// quoteEmpty shows an empty identity field (a namespace removed) as "".
func quoteEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// identityChanges lists the identity fields in which two objects differ.
func identityChanges(read, written ResourceRef) []identityChange {
	var out []identityChange
	for _, f := range []struct{ field, from, to string }{
		{"apiVersion", read.APIVersion, written.APIVersion},
		{"kind", read.Kind, written.Kind},
		{"namespace", read.Namespace, written.Namespace},
		{"name", read.Name, written.Name},
	} {
		if f.from != f.to {
			out = append(out, identityChange{Field: f.field, From: f.from, To: f.to})
		}
	}
	return out
}

// CheckRetarget refuses a patched mutate-existing target whose identity
// differs from the target that was read. The engine checks every
// patched target with it; the background controller checks again at the
// write, so that nothing the engine missed is written.
func CheckRetarget(rule string, read ResourceRef, patched map[string]any) error {
	if changes := identityChanges(read, RefOf(patched)); len(changes) > 0 {
		return &retargetError{Rule: rule, Read: read, Changes: changes}
	}
	return nil
}
