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
// Two Go implementations were measured on the behaviours that decide Kyverno
// compatibility. library_choice_test.go runs the table on both (go test -v
// -run LibraryChoice prints it) and fails if the chosen one drifts:
//
//	behaviour                            kyverno/go-jmespath          jmespath-community/go-jmespath
//	bare path, missing key (a.x)         error: Unknown key "x"       null
//	missing key inside == (a.x == a.y)   true                         true
//	missing key == `1`                   false                        false
//	missing key || 'd'                   "d"                          "d"
//	not_null(a.x, 'd')                   "d"                          "d"
//	filter over a missing key            element filtered out         element filtered out
//	projection over a missing key        skipped                      skipped
//	number literal                       float64                      float64
//	int64 data to a number argument      type error                   type error
//	custom sum replaces the built-in     yes (Register)               yes (extra FunctionEntry)
//
// They differ in one row, and it is the one that matters: only the Kyverno
// fork raises NotFoundError for a bare missing key, which is what makes
// {{request.object.metadata.labels.foo}} a rule error in Kyverno
// (validate-semantics.md §6.4) and what policies guard against with "|| default". Its
// FunctionCaller/Register API is also the one Kyverno's functions were written
// against. Decision: github.com/kyverno/go-jmespath, at the version Kyverno
// pins.
//
// Data is JSON-like: map[string]any, []any, float64, string, bool and nil, as
// encoding/json decodes it. Custom functions also accept Go integers, but the
// library's own type checks and comparisons only know float64, so callers
// should decode documents with encoding/json rather than build them with ints.
package jmespath
