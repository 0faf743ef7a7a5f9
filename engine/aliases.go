package engine

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/review"
)

// The request and response types live in engine/review, and what the CEL
// kinds share in engine/celruntime, where the kinds' packages read them;
// these names keep the engine's contract.
type (
	// Request is what a policy is evaluated against (review.Request).
	Request = review.Request
	// ResourceRef names the resource a response is about.
	ResourceRef = review.ResourceRef
	// RuleStatus is the outcome of a rule.
	RuleStatus = review.RuleStatus
	// RuleType is the kind of a rule.
	RuleType = review.RuleType
	// Action is a failure action: Audit or Enforce.
	Action = review.Action
	// PolicyResponse holds the rule responses of one policy.
	PolicyResponse = review.PolicyResponse
	// RuleResponse is the result of one rule.
	RuleResponse = review.RuleResponse
	// Values pins variables to fixed values (review.Values).
	Values = review.Values
	// ExceptionScope says where a policies.kyverno.io PolicyException
	// acts (celruntime.ExceptionScope).
	ExceptionScope = celruntime.ExceptionScope
)

// The rule statuses, rule types and failure actions.
const (
	StatusPass  = review.StatusPass
	StatusFail  = review.StatusFail
	StatusWarn  = review.StatusWarn
	StatusError = review.StatusError
	StatusSkip  = review.StatusSkip

	TypeValidation  = review.TypeValidation
	TypeMutation    = review.TypeMutation
	TypeGeneration  = review.TypeGeneration
	TypeImageVerify = review.TypeImageVerify

	Audit   = review.Audit
	Enforce = review.Enforce

	// ExceptionOwnNamespace and ExceptionAnyNamespace are the scopes of
	// a policies.kyverno.io PolicyException.
	ExceptionOwnNamespace = celruntime.ExceptionOwnNamespace
	ExceptionAnyNamespace = celruntime.ExceptionAnyNamespace

	// RuleException and RuleEvaluation are the rule names of CEL policy
	// results other than the policy's own "".
	RuleException  = celruntime.RuleException
	RuleEvaluation = celruntime.RuleEvaluation
)

// RequestForObject builds a CREATE request for an unstructured object.
func RequestForObject(obj *unstructured.Unstructured) *Request { return review.RequestForObject(obj) }
