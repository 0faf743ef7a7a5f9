// Package celenv holds what the CEL environments of every policy kind
// share and what needs nothing of a policy or a request: the value adapter
// that hands request objects to CEL without copying them (SharedAdapter),
// the lenient orValue rewrite (WithLenientOrValue), the size and cost
// bounds under which a program may run untracked (InputBound, BoundSizes,
// EstimateMaxCost, LargestBounded), Kyverno's offline libraries
// (PureLibraryOptions: image references, math, x509, gzip; RandomMatching)
// and the helpers that declare library functions (Method, Member, Global).
// It is a leaf of engine/: the engine root and its kind packages import
// it, it imports none of them.
package celenv
