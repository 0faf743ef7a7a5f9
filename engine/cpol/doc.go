// Package cpol is the kyverno.io ClusterPolicy and Policy kind: compile
// (the spec checks, webhook matchConditions, autogen, the rules), the
// rule pipeline match → context → preconditions → exceptions → handler
// (validate, mutate, generate, verifyImages) over a review.View, and the
// kyverno.io PolicyExceptions. The root engine holds a Policy beside the
// CEL kinds' (vpol, mpol, gpol, ivpol), indexes it and files its
// responses; what the rules of one request share is a Request, what those
// of a set share an Env. A Run evaluates context entries and conditions
// without a policy, for the kyverno.io cleanup policies.
package cpol
