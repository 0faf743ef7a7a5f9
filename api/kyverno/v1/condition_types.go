package v1

import (
	"encoding/json"
	"fmt"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// ConditionOperator compares a condition's key with its value.
// +kubebuilder:validation:Enum=Equals;NotEquals;In;AnyIn;AllIn;NotIn;AnyNotIn;AllNotIn;GreaterThanOrEquals;GreaterThan;LessThanOrEquals;LessThan;DurationGreaterThanOrEquals;DurationGreaterThan;DurationLessThanOrEquals;DurationLessThan
type ConditionOperator string

// Condition operators. Equal, NotEqual and the Duration* forms are kept for
// policies written against older Kyverno releases.
const (
	ConditionOperatorEquals                      ConditionOperator = "Equals"
	ConditionOperatorNotEquals                   ConditionOperator = "NotEquals"
	ConditionOperatorIn                          ConditionOperator = "In"
	ConditionOperatorAnyIn                       ConditionOperator = "AnyIn"
	ConditionOperatorAllIn                       ConditionOperator = "AllIn"
	ConditionOperatorNotIn                       ConditionOperator = "NotIn"
	ConditionOperatorAnyNotIn                    ConditionOperator = "AnyNotIn"
	ConditionOperatorAllNotIn                    ConditionOperator = "AllNotIn"
	ConditionOperatorGreaterThanOrEquals         ConditionOperator = "GreaterThanOrEquals"
	ConditionOperatorGreaterThan                 ConditionOperator = "GreaterThan"
	ConditionOperatorLessThanOrEquals            ConditionOperator = "LessThanOrEquals"
	ConditionOperatorLessThan                    ConditionOperator = "LessThan"
	ConditionOperatorDurationGreaterThanOrEquals ConditionOperator = "DurationGreaterThanOrEquals"
	ConditionOperatorDurationGreaterThan         ConditionOperator = "DurationGreaterThan"
	ConditionOperatorDurationLessThanOrEquals    ConditionOperator = "DurationLessThanOrEquals"
	ConditionOperatorDurationLessThan            ConditionOperator = "DurationLessThan"
)

// ConditionOperators lists every valid ConditionOperator.
var ConditionOperators = []ConditionOperator{
	ConditionOperatorEquals, ConditionOperatorNotEquals,
	ConditionOperatorIn, ConditionOperatorAnyIn, ConditionOperatorAllIn,
	ConditionOperatorNotIn, ConditionOperatorAnyNotIn, ConditionOperatorAllNotIn,
	ConditionOperatorGreaterThanOrEquals, ConditionOperatorGreaterThan,
	ConditionOperatorLessThanOrEquals, ConditionOperatorLessThan,
	ConditionOperatorDurationGreaterThanOrEquals, ConditionOperatorDurationGreaterThan,
	ConditionOperatorDurationLessThanOrEquals, ConditionOperatorDurationLessThan,
}

// IsValid reports whether o is a known operator.
func (o ConditionOperator) IsValid() bool {
	for _, known := range ConditionOperators {
		if o == known {
			return true
		}
	}
	return false
}

// Condition compares a key with a value. Both may be any JSON and may hold
// variables.
type Condition struct {
	// RawKey is the left-hand side.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	RawKey *apiextv1.JSON `json:"key,omitempty"`

	// Operator compares key and value.
	Operator ConditionOperator `json:"operator,omitempty"`

	// RawValue is the right-hand side.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	RawValue *apiextv1.JSON `json:"value,omitempty"`

	// Message is reported when the condition fails.
	// +optional
	Message string `json:"message,omitempty"`
}

// Key returns the decoded key, nil when absent.
func (c *Condition) Key() (any, error) { return decodeJSON(c.RawKey) }

// Value returns the decoded value, nil when absent.
func (c *Condition) Value() (any, error) { return decodeJSON(c.RawValue) }

// AnyAllConditions holds conditions that pass when any of AnyConditions and
// all of AllConditions pass (an empty list passes).
type AnyAllConditions struct {
	// AnyConditions pass when at least one passes.
	// +optional
	AnyConditions []Condition `json:"any,omitempty"`

	// AllConditions pass when every one passes.
	// +optional
	AllConditions []Condition `json:"all,omitempty"`
}

// ParseConditions decodes free-form conditions (a rule's preconditions, a
// deny block's conditions) in either form Kyverno accepts: an object with
// any/all lists, or the older plain list, which means "all of these". A nil
// or empty input yields nil.
func ParseConditions(raw *apiextv1.JSON) (*AnyAllConditions, error) {
	if raw == nil || len(raw.Raw) == 0 || string(raw.Raw) == "null" {
		return nil, nil
	}
	var probe any
	if err := json.Unmarshal(raw.Raw, &probe); err != nil {
		return nil, fmt.Errorf("conditions: %w", err)
	}
	switch probe.(type) {
	case []any:
		var list []Condition
		if err := strictUnmarshal(raw.Raw, &list); err != nil {
			return nil, fmt.Errorf("conditions: %w", err)
		}
		return &AnyAllConditions{AllConditions: list}, nil
	case map[string]any:
		var anyAll AnyAllConditions
		if err := strictUnmarshal(raw.Raw, &anyAll); err != nil {
			return nil, fmt.Errorf("conditions: %w", err)
		}
		return &anyAll, nil
	default:
		return nil, fmt.Errorf("conditions: want an object with any/all or a list, got %s", raw.Raw)
	}
}

func decodeJSON(raw *apiextv1.JSON) (any, error) {
	if raw == nil || len(raw.Raw) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw.Raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}
