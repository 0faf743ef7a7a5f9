package conditions

import (
	"errors"
	"testing"
)

type opCase struct {
	name  string
	key   any
	op    string
	value any
	want  bool
}

// specCases are the verified condition rows of validate-semantics.md §10.
var specCases = []opCase{
	{"wildcard in value", "nginx:latest", "Equals", "*:latest", true},
	{"wildcard in key is literal", "*:latest", "Equals", "nginx:latest", false},
	{"quantities", "1Gi", "Equals", "1024Mi", true},
	{"duration vs seconds", "1h", "Equals", 3600.0, true},
	{"number vs numeric string", 3.0, "Equals", "3", true},
	{"arrays are ordered", []any{"a", "b"}, "Equals", []any{"b", "a"}, false},
	{"null never equals", nil, "Equals", nil, false},
	{"bool vs string", true, "Equals", "true", false},
	{"not equals honours wildcard", "foo", "NotEquals", "f*", false},
	{"any in", []any{"a", "z"}, "AnyIn", []any{"a", "b"}, true},
	{"all in, one missing", []any{"a", "z"}, "AllIn", []any{"a", "b"}, false},
	{"all in, wildcard value, b matches nothing", []any{"a", "b"}, "AllIn", []any{"a*"}, false},
	{"empty any in", []any{}, "AnyIn", []any{"a"}, false},
	{"empty all in", []any{}, "AllIn", []any{"a"}, true},
	{"empty all not in", []any{}, "AllNotIn", []any{"a"}, true},
	{"empty any not in", []any{}, "AnyNotIn", []any{"a"}, false},
	{"number in range", 5.0, "AnyIn", "1-10", true},
	{"all in range, one outside", []any{5.0, 20.0}, "AllIn", "1-10", false},
	{"any not in range", []any{5.0, 20.0}, "AnyNotIn", "1-10", true},
	{"JSON array string", "a", "AnyIn", `["a","b"]`, true},
	{"string number greater", "10", "GreaterThan", 9.0, true},
	{"quantity greater", "1Gi", "GreaterThan", "1000Mi", true},
	{"duration greater", "90m", "GreaterThan", "1h", true},
	{"semver greater", "1.10.0", "GreaterThan", "1.9.0", true},
	{"strings do not order", "abc", "GreaterThan", "abb", false},
	{"seconds vs duration", 3700.0, "GreaterThan", "1h", true},
}

// moreCases cover the rest of §6.3.
var moreCases = []opCase{
	// Equals by key type.
	{"bool equal", false, "Equals", false, true},
	{"float vs int-like float", 3.0, "Equals", 3.0, true},
	{"float vs fractional string", 1.5, "Equals", "1.5", true},
	{"float vs bad string", 1.5, "Equals", "x", false},
	{"int key vs fractional float", int64(3), "Equals", 3.5, false},
	{"int key vs string", 7, "Equals", "7", true},
	{"string number vs number is not equal", "3", "Equals", 3.0, false},
	{"quantity key vs non-quantity string compares strings", "5", "Equals", "5*", true},
	{"quantity key vs empty string", "1Gi", "Equals", "", false},
	{"plain strings", "abc", "Equals", "abc", true},
	{"question wildcard", "abc", "Equals", "a?c", true},
	{"string vs number", "abc", "Equals", 1.0, false},
	{"zero is not a duration", "0", "Equals", 0.0, false},
	{"map deep equal", map[string]any{"a": 1.0}, "Equals", map[string]any{"a": 1.0}, true},
	{"map vs other map", map[string]any{"a": 1.0}, "Equals", map[string]any{"a": 2.0}, false},
	{"array deep equal", []any{"a", 1.0}, "Equals", []any{"a", 1.0}, true},
	{"deprecated Equal", "a", "Equal", "a", true},
	{"case-insensitive name", "a", "equals", "a", true},
	{"duration equals duration", "60m", "Equals", "1h", true},

	// NotEquals.
	{"not equals type mismatch", true, "NotEquals", "true", true},
	{"not equals bools", true, "NotEquals", false, true},
	{"not equals same", "a", "NotEquals", "a", false},
	{"not equals null key", nil, "NotEquals", "a", false},
	{"not equals number vs string", 3.0, "NotEquals", "3", false},
	{"not equals number vs bad string", 3.0, "NotEquals", "x", true},
	{"not equals map vs string", map[string]any{}, "NotEquals", "x", true},
	{"not equals arrays", []any{"a"}, "NotEquals", []any{"b"}, true},
	{"not equals durations", "1h", "NotEquals", 3600.0, false},
	{"not equals quantities", "1Gi", "NotEquals", "1Mi", true},
	{"not equals quantity vs junk", "1Gi", "NotEquals", "junk", true},
	{"not equals quantity vs empty string", "1Gi", "NotEquals", "", true},
	{"not equals quantity vs same string", "500m", "NotEquals", "500m", false},
	{"deprecated NotEqual", "a", "NotEqual", "b", true},

	// AnyIn / AllIn / AnyNotIn / AllNotIn.
	{"scalar in list", "b", "AnyIn", []any{"a", "b"}, true},
	{"scalar in wildcard list", "nginx", "AnyIn", []any{"ng*"}, true},
	{"wildcard key against list", "ng*", "AnyIn", []any{"nginx"}, true},
	{"scalar number stringified", 5.0, "AnyIn", []any{"5"}, true},
	{"number list element", "5", "AnyIn", []any{5.0}, true},
	{"bool key", true, "AnyIn", []any{"true"}, true},
	{"scalar value", "5", "AnyIn", 5.0, true},
	{"single literal string", "a", "AnyIn", "a", true},
	{"single wildcard string", "kube-system", "AnyIn", "kube-*", true},
	{"single literal miss", "a", "AnyIn", "b", false},
	{"null key", nil, "AnyIn", []any{"a"}, false},
	{"null value", "a", "AnyIn", nil, false},
	{"bad JSON array", "a", "AnyIn", `["a",`, false},
	{"quantity in range", "1Gi", "AnyIn", "512Mi-2Gi", true},
	{"out of range", 11.0, "AnyIn", "1-10", false},
	{"range bounds closed", []any{1.0, 10.0}, "AllIn", "1-10", true},
	{"outside range form", 11.0, "AnyIn", "1!-10", true},
	{"outside range form, inside", 5.0, "AnyIn", "1!-10", false},
	{"non-number not in range", "abc", "AnyIn", "1-10", false},
	{"all in", []any{"a", "b"}, "AllIn", []any{"a", "b", "c"}, true},
	{"all in wildcard", []any{"app-1", "app-2"}, "AllIn", []any{"app-*"}, true},
	{"scalar all in", "a", "AllIn", []any{"a"}, true},
	{"any not in", []any{"a", "z"}, "AnyNotIn", []any{"a", "b"}, true},
	{"any not in, all present", []any{"a", "b"}, "AnyNotIn", []any{"a", "b"}, false},
	{"all not in", []any{"x", "y"}, "AllNotIn", []any{"a", "b"}, true},
	{"all not in, one present", []any{"x", "a"}, "AllNotIn", []any{"a", "b"}, false},
	{"all not in range", []any{20.0, 30.0}, "AllNotIn", "1-10", true},
	{"all not in JSON", "c", "AllNotIn", `["a","b"]`, true},

	// Deprecated In / NotIn.
	{"in scalar", "a", "In", []any{"a", "b"}, true},
	{"in scalar key is the pattern", "a*", "In", []any{"abc"}, true},
	{"in scalar value pattern not honoured", "abc", "In", []any{"a*"}, false},
	{"in array subset", []any{"a", "b"}, "In", []any{"a", "b", "c"}, true},
	{"in array not subset", []any{"a", "d"}, "In", []any{"a", "b"}, false},
	{"in array no wildcard", []any{"abc"}, "In", []any{"a*"}, false},
	{"in array non-string key", []any{1.0}, "In", []any{"1"}, false},
	{"in JSON string", "b", "In", `["a","b"]`, true},
	{"not in scalar", "c", "NotIn", []any{"a", "b"}, true},
	{"not in array, one missing", []any{"a", "c"}, "NotIn", []any{"a", "b"}, true},
	{"not in array, all present", []any{"a"}, "NotIn", []any{"a", "b"}, false},
	{"not in invalid value", "a", "NotIn", map[string]any{}, false},

	// Ordering.
	{"numbers", 5.0, "GreaterThan", 4.0, true},
	{"numbers equal, or-equals", 5.0, "GreaterThanOrEquals", 5.0, true},
	{"numbers less", 4.0, "LessThan", 5.0, true},
	{"numbers less or equal", 5.0, "LessThanOrEquals", 5.0, true},
	{"int keys", 5, "GreaterThan", int64(4), true},
	{"number vs numeric string", 5.0, "GreaterThan", "4.5", true},
	{"number vs junk string", 5.0, "GreaterThan", "x", false},
	{"number vs bool", 5.0, "GreaterThan", true, false},
	{"string numbers", "10", "LessThan", "9", false},
	{"quantity less", "500m", "LessThan", "1", true},
	{"quantity key vs number value is not compared", "2Gi", "GreaterThan", 1.0, false},
	{"semver less", "1.2.3", "LessThan", "1.10.0", true},
	{"semver vs non-semver", "1.2.3", "LessThan", "abc", false},
	{"durations", "30s", "LessThan", "1m", true},
	{"duration vs seconds", "2m", "GreaterThan", 100.0, true},
	{"null key orders nothing", nil, "GreaterThan", 1.0, false},
	{"bool key orders nothing", true, "GreaterThan", false, false},
	{"case-insensitive ordering name", 2.0, "greaterthan", 1.0, true},

	// Deprecated Duration*.
	{"duration greater", "2h", "DurationGreaterThan", "1h", true},
	{"duration less or equal", "1h", "DurationLessThanOrEquals", 3600.0, true},
	{"duration seconds key", 30.0, "DurationLessThan", "1m", true},
	{"duration bad key", "x", "DurationGreaterThan", "1h", false},
	{"duration bad value", "1h", "DurationGreaterThanOrEquals", "x", false},
	{"duration fractional seconds truncate", 1.9, "DurationLessThanOrEquals", "1s", true},
}

func TestEvaluate(t *testing.T) {
	for _, set := range []struct {
		name  string
		cases []opCase
	}{{"spec", specCases}, {"more", moreCases}} {
		t.Run(set.name, func(t *testing.T) {
			for _, tc := range set.cases {
				t.Run(tc.name, func(t *testing.T) {
					got, err := Evaluate(tc.key, tc.op, tc.value)
					if err != nil {
						t.Fatalf("Evaluate(%#v, %s, %#v): %v", tc.key, tc.op, tc.value, err)
					}
					if got != tc.want {
						t.Errorf("Evaluate(%#v, %s, %#v) = %v, want %v", tc.key, tc.op, tc.value, got, tc.want)
					}
				})
			}
		})
	}
}

func TestUnknownOperator(t *testing.T) {
	_, err := Evaluate("a", "Contains", "a")
	var unknown *UnknownOperatorError
	if !errors.As(err, &unknown) || unknown.Name != "Contains" {
		t.Fatalf("got %v, want an UnknownOperatorError naming Contains", err)
	}
	if err.Error() != `unknown condition operator "Contains"` {
		t.Errorf("message %q", err.Error())
	}
}

func TestOperatorNames(t *testing.T) {
	for _, name := range []string{"Equals", "notequals", "ANYIN", "AllIn", "AnyNotIn", "AllNotIn", "GreaterThan",
		"GreaterThanOrEquals", "LessThan", "LessThanOrEquals", "Equal", "NotEqual", "In", "NotIn",
		"DurationGreaterThan", "DurationGreaterThanOrEquals", "DurationLessThan", "DurationLessThanOrEquals"} {
		if !ValidOperator(name) {
			t.Errorf("ValidOperator(%q) = false", name)
		}
	}
	for _, name := range []string{"", "Contains", "Equals ", "=="} {
		if ValidOperator(name) {
			t.Errorf("ValidOperator(%q) = true", name)
		}
	}
	if op, _ := Parse("anyin"); op != AnyIn {
		t.Errorf("Parse(anyin) = %q", op)
	}
	if r, dep := Deprecation("In"); !dep || r != "AllIn or AnyIn" {
		t.Errorf("Deprecation(In) = %q, %v", r, dep)
	}
	if _, dep := Deprecation("AnyIn"); dep {
		t.Error("AnyIn reported deprecated")
	}
}

func FuzzEvaluate(f *testing.F) {
	f.Add("1Gi", "GreaterThan", "1000Mi")
	f.Add("5", "AnyIn", "1-10")
	f.Add("a", "AnyIn", `["a","b"]`)
	f.Add("1.10.0", "LessThan", "1.9.0")
	f.Add("90m", "Equals", "1h")
	f.Add("x", "AllNotIn", "1!-2")
	f.Fuzz(func(t *testing.T, key, op, value string) {
		for _, k := range []any{key, []any{key, value}} {
			for _, v := range []any{value, []any{value}, 3.0, nil} {
				_, _ = Evaluate(k, op, v)
			}
		}
	})
}
