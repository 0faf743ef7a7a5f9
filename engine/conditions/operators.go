// Package conditions evaluates the condition operators of Kyverno rules
// (preconditions, validate.deny.conditions, foreach preconditions), with
// the type coercions of validate-semantics.md §6.2–§6.3.
//
// Keys and values arrive with variables already substituted and keep their
// JSON types: string, float64, bool, nil, map[string]any, []any (int and
// int64 are accepted too). The any/all structure of condition blocks is the
// engine's business; this package evaluates one condition.
package conditions

import (
	"fmt"
	"strings"
)

// Operator is a canonical condition operator name.
type Operator string

// The operators of kyverno.io/v1 ConditionOperators.
const (
	Equals              Operator = "Equals"
	NotEquals           Operator = "NotEquals"
	AnyIn               Operator = "AnyIn"
	AllIn               Operator = "AllIn"
	AnyNotIn            Operator = "AnyNotIn"
	AllNotIn            Operator = "AllNotIn"
	GreaterThan         Operator = "GreaterThan"
	GreaterThanOrEquals Operator = "GreaterThanOrEquals"
	LessThan            Operator = "LessThan"
	LessThanOrEquals    Operator = "LessThanOrEquals"

	// Deprecated operators, still accepted.
	Equal                       Operator = "Equal"
	NotEqual                    Operator = "NotEqual"
	In                          Operator = "In"
	NotIn                       Operator = "NotIn"
	DurationGreaterThan         Operator = "DurationGreaterThan"
	DurationGreaterThanOrEquals Operator = "DurationGreaterThanOrEquals"
	DurationLessThan            Operator = "DurationLessThan"
	DurationLessThanOrEquals    Operator = "DurationLessThanOrEquals"
)

var operators = map[string]Operator{}

var deprecated = map[Operator]string{
	Equal:                       "Equals",
	NotEqual:                    "NotEquals",
	In:                          "AllIn or AnyIn",
	NotIn:                       "AllNotIn or AnyNotIn",
	DurationGreaterThan:         "GreaterThan",
	DurationGreaterThanOrEquals: "GreaterThanOrEquals",
	DurationLessThan:            "LessThan",
	DurationLessThanOrEquals:    "LessThanOrEquals",
}

func init() {
	for _, op := range []Operator{Equals, NotEquals, AnyIn, AllIn, AnyNotIn, AllNotIn, GreaterThan,
		GreaterThanOrEquals, LessThan, LessThanOrEquals, Equal, NotEqual, In, NotIn, DurationGreaterThan,
		DurationGreaterThanOrEquals, DurationLessThan, DurationLessThanOrEquals} {
		operators[strings.ToLower(string(op))] = op
	}
}

// Parse returns the canonical operator for a name, matched without regard to
// case as Kyverno does ("equals" is Equals).
func Parse(name string) (Operator, bool) {
	op, ok := operators[strings.ToLower(name)]
	return op, ok
}

// ValidOperator reports whether name is a condition operator, deprecated
// ones included.
func ValidOperator(name string) bool {
	_, ok := Parse(name)
	return ok
}

// Deprecation returns, for a deprecated operator, what to use instead.
func Deprecation(name string) (replacement string, isDeprecated bool) {
	op, ok := Parse(name)
	if !ok {
		return "", false
	}
	replacement, isDeprecated = deprecated[op]
	return replacement, isDeprecated
}

// UnknownOperatorError is returned for an operator name Kyverno does not know.
type UnknownOperatorError struct{ Name string }

func (e *UnknownOperatorError) Error() string {
	return fmt.Sprintf("unknown condition operator %q", e.Name)
}

// Evaluate applies the operator named op to key and value. An unknown
// operator is an error (the rule result is error); every other combination,
// including mismatched types, gives a boolean.
func Evaluate(key any, op string, value any) (bool, error) {
	o, ok := Parse(op)
	if !ok {
		return false, &UnknownOperatorError{Name: op}
	}
	return o.Evaluate(key, value), nil
}

// Evaluate applies o to key and value. An Operator that is not one of the
// constants gives false.
func (o Operator) Evaluate(key, value any) bool {
	switch o {
	case Equals, Equal:
		return equals(key, value)
	case NotEquals, NotEqual:
		return notEquals(key, value)
	case AnyIn:
		return anyIn(key, value)
	case AllIn:
		return allIn(key, value)
	case AnyNotIn:
		return anyNotIn(key, value)
	case AllNotIn:
		return allNotIn(key, value)
	case In:
		return in(key, value)
	case NotIn:
		return notIn(key, value)
	case GreaterThan, GreaterThanOrEquals, LessThan, LessThanOrEquals:
		return numeric(o, key, value)
	case DurationGreaterThan, DurationGreaterThanOrEquals, DurationLessThan, DurationLessThanOrEquals:
		return durationOp(o, key, value)
	}
	return false
}

// holds reports whether the three-way comparison result cmp satisfies an
// ordering operator.
func (o Operator) holds(cmp int) bool {
	switch o {
	case GreaterThan, DurationGreaterThan:
		return cmp > 0
	case GreaterThanOrEquals, DurationGreaterThanOrEquals:
		return cmp >= 0
	case LessThan, DurationLessThan:
		return cmp < 0
	case LessThanOrEquals, DurationLessThanOrEquals:
		return cmp <= 0
	}
	return false
}
