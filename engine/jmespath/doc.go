// Package jmespath evaluates JMESPath expressions the way Kyverno does: with
// Kyverno's fork of the library and its 51 custom functions
// (shared/spec/jmespath-functions.md).
//
// Create one Interpreter per process with New and share it; it caches compiled
// queries. The package is pure apart from three injectable dependencies: the
// clock (time_now*, time_since), DNS (is_external_url) and randomness (random).
//
// # Library choice
//
// Two Go implementations were measured against the behaviours charter must
// reproduce (library_choice_test.go runs the table on both and fails if the
// chosen one drifts):
//
//	behaviour                              kyverno/go-jmespath        jmespath-community/go-jmespath
//	bare path, missing key (a.x)           error: Unknown key "x"     null            <- Kyverno: error
//	missing key inside ==                  null == null: true         true
//	missing key with || default            'd'                        'd'
//	missing key as function argument       null (not_null -> 'd')     null
//	missing key inside a filter            filtered out               filtered out
//	number literal type                    float64                    float64
//	integer data (int64) in arithmetic     rejected by type check     rejected
//	replace built-in sum                   Register overrides         append overrides
//	FunctionEntry/ArgSpec/Register API     yes (spec'd in Kyverno)    different package layout
//
// Only the Kyverno fork raises NotFoundError for a bare missing key, which is
// what turns {{request.object.metadata.labels.foo}} into a rule error in
// Kyverno (validate-semantics.md §6.4). Decision: github.com/kyverno/go-jmespath,
// the version Kyverno pins.
//
// Data is JSON-like: map[string]any, []any, float64, string, bool and nil, as
// encoding/json decodes it. Custom functions also accept Go integers, but the
// library's own type checks and comparisons only know float64, so callers
// should decode documents with encoding/json rather than build them with ints.
package jmespath
