// Package variables substitutes Kyverno variables in JSON-like documents
// (shared/spec/validate-semantics.md §6.4, mutate-generate-semantics.md §1.6):
//
//   - {{ expr }} is a JMESPath expression resolved by a Resolver. A string that
//     is exactly one variable becomes the typed result (object, number, ...);
//     a variable inside a longer string is stringified (JSON for non-strings).
//   - Nested variables resolve inner first: {{ lookup(m, '{{ key }}') }}.
//     Substituted text is scanned again for variables, as Kyverno does, unless
//     the variable is written {{- expr }} (shallow).
//   - \{{ expr }} is an escape: the text stays, without the backslash.
//   - {{@}} is the resource value at the current pattern position
//     (request.object.<path>, or target.<path> in mutate-existing).
//   - $(./relative/path) references another value of the same document,
//     relative to the referencing string's position; an operator prefix is
//     kept: $(<=./../../limits/memory) becomes "<=2Gi".
//
// Substitution never modifies its input and returns it unchanged (without
// allocating) when there is nothing to substitute. Variables are substituted
// in map keys as well as in string values.
//
// The package is pure: everything it resolves goes through the Resolver.
package variables
