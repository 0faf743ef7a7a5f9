package jmespath

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	community "github.com/jmespath-community/go-jmespath"
	kyvernojp "github.com/kyverno/go-jmespath"
)

// TestLibraryChoice measures both candidate libraries on the behaviours that
// decide Kyverno compatibility and records the results (run with -v). It
// fails if the chosen library (the Kyverno fork) stops behaving like Kyverno;
// the community library's rows are informational.
func TestLibraryChoice(t *testing.T) {
	var data any
	if err := json.Unmarshal([]byte(`{"a": {"b": 1}, "list": [{"n": 1}, {"m": 2}], "big": 12}`), &data); err != nil {
		t.Fatal(err)
	}
	// A custom sum that returns a marker, to see whether it replaces the built-in.
	kyvernoCaller := kyvernojp.NewFunctionCaller()
	kyvernoCaller.Register(kyvernojp.FunctionEntry{
		Name:      "sum",
		Arguments: []kyvernojp.ArgSpec{{Types: []kyvernojp.JpType{kyvernojp.JpArray}}},
		Handler:   func([]any) (any, error) { return "overridden", nil },
	})
	communitySum := community.FunctionEntry{
		Name:      "sum",
		Arguments: []community.ArgSpec{{Types: []community.JpType{community.JpArray}}},
		Handler:   func([]any) (any, error) { return "overridden", nil },
	}

	kyvernoSearch := func(expr string, d any) string {
		return outcome(kyvernojp.Search(expr, d, kyvernojp.WithFunctionCaller(kyvernoCaller)))
	}
	communitySearch := func(expr string, d any) string {
		return outcome(community.Search(expr, d, communitySum))
	}

	for _, tc := range []struct {
		name, expr string
		data       any
		kyverno    string // what Kyverno does, and what charter must do
	}{
		{"bare path, missing key", "a.x", data, `error: Unknown key "x" in path`},
		{"missing key inside ==", "a.x == a.y", data, "true"},
		{"missing key compared to a value", "a.x == `1`", data, "false"},
		{"missing key with || default", "a.x || 'd'", data, `"d"`},
		{"missing key as function argument", "not_null(a.x, 'd')", data, `"d"`},
		{"missing key inside a filter", "list[?n == `1`]", data, `[{"n":1}]`},
		{"missing key in a projection", "list[*].n", data, "[1]"},
		{"number literal type", "`9`", data, "float64(9)"},
		{"integer data is not a JSON number", "abs(big)", map[string]any{"big": int64(12)}, "error: Invalid type for: 12, expected: []jmespath.JpType{\"number\"}"},
		{"custom sum overrides the built-in", "sum(`[1,2]`)", data, `"overridden"`},
	} {
		got := kyvernoSearch(tc.expr, tc.data)
		t.Logf("%-36s kyverno/go-jmespath: %-45s jmespath-community: %s", tc.name, got, communitySearch(tc.expr, tc.data))
		if got != tc.kyverno {
			t.Errorf("%s: %s = %s, want %s", tc.name, tc.expr, got, tc.kyverno)
		}
	}
}

func outcome(v any, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	if f, ok := v.(float64); ok {
		return fmt.Sprintf("float64(%v)", f)
	}
	b, _ := json.Marshal(v)
	if v != nil && reflect.TypeOf(v).Kind() == reflect.Int64 {
		return "int64"
	}
	return string(b)
}
