// Package mutate holds the patch primitives of charter's mutate rules: Kyverno's
// patchStrategicMerge (anchor pre-processing followed by kustomize kyaml's strategic
// merge), RFC 6902 JSON patches with Kyverno's options, and the RFC 6902 diff the
// admission webhook returns.
//
// The package is pure: no clients, no goroutines, no global state that changes after
// start-up. Variables in patches are substituted by the caller before it calls in here
// (including per element in foreach, where the caller substitutes once per element and
// calls StrategicMerge / JSON6902 for each).
//
// Values follow the Kubernetes unstructured convention: maps are map[string]any, lists
// []any, integral numbers int64 and other numbers float64. Inputs may use any Go number
// type; outputs are normalised to that convention, so compare results with Equal, which
// compares as JSON does, rather than reflect.DeepEqual.
//
// Statuses (spec §1.3): a rule whose patch returns a *ConditionError, or whose
// result is Equal to its input, is `skip` "no patches applied"; list order counts, so
// a patch that only moves a container to the front is a change (`pass`), as in
// Kyverno. Any other error is a rule `error` ("failed to patch resource: " + err).
//
// Diff builds the admission patch. Kyverno uses gomodules.xyz/jsonpatch, whose
// operation order follows Go map iteration; Diff is deterministic and smaller, and
// yields the same patched object.
//
// Behaviour follows ../shared/spec/mutate-generate-semantics.md (Kyverno v1.19.0) §2, §3
// and §6, except where Kyverno is wrong in a way no policy author intends; those places
// are listed on StrategicMerge and each has a test named after its case.
package mutate
