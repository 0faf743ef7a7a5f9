package review

import (
	"time"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/engine/policyid"
)

// RuleStatus is the outcome of one rule, as reports show it.
type RuleStatus string

// Rule outcomes.
const (
	StatusPass  RuleStatus = "pass"
	StatusFail  RuleStatus = "fail"
	StatusWarn  RuleStatus = "warn"
	StatusError RuleStatus = "error"
	StatusSkip  RuleStatus = "skip"
)

// RuleType is the kind of rule a response comes from.
type RuleType string

// Rule types.
const (
	TypeValidation  RuleType = "Validation"
	TypeMutation    RuleType = "Mutation"
	TypeGeneration  RuleType = "Generation"
	TypeImageVerify RuleType = "ImageVerify"
)

// Action is the effective failure action of a validate rule.
type Action string

// Failure actions. The lower-case spellings Kyverno accepts are normalised to
// these.
const (
	Audit   Action = "Audit"
	Enforce Action = "Enforce"
)

// PolicyResponse holds the rule responses of one policy.
type PolicyResponse struct {
	// Policy is the policy as compiled.
	Policy kyvernov1.PolicyInterface
	// Key is "name" for a ClusterPolicy and "namespace/name" for a Policy.
	Key string
	// Rules holds one response per rule that matched, in rule order.
	Rules []RuleResponse
	// Patched is, for mutation, the object after this policy's rules (and
	// every earlier policy's): what `kyverno test` compares with
	// patchedResources.
	Patched map[string]any
	// Duration is how long the policy's rules took to evaluate; set by
	// PolicySet.ValidateTimed, and by PolicySet.Generate for a
	// GeneratingPolicy; zero elsewhere.
	Duration time.Duration
}

// RuleResponse is the result of one rule.
type RuleResponse struct {
	// Name is the rule name; autogen rules carry their generated names
	// (autogen-<rule>, autogen-cronjob-<rule>).
	Name string
	Type RuleType
	// Status is the outcome. A fail of a policy annotated
	// policies.kyverno.io/scored: "false" is reported as warn.
	Status RuleStatus
	// Message is Kyverno's message for the outcome, e.g.
	// "validation error: <message>. rule <name> failed at path <path>".
	Message string
	// Action is the effective failure action (validate rules only).
	Action Action
	// Exceptions are the PolicyExceptions that made the rule skip.
	Exceptions []*kyvernov2.PolicyException
	// Properties are the rule's reportProperties plus details the result
	// carries: for a validate.podSecurity rule, the standard, its version
	// and the controls that failed ("controls": "capabilities_baseline,...";
	// what each found is in Message). A rule response is 176 bytes, and a
	// Pod review of the Pod Security set keeps 18 of them: a field more
	// costs every review, so details a few rules have go here.
	Properties map[string]string
	// Target is, for a mutate-existing rule, the existing resource this
	// response is about (one response per target); PatchedTarget is that
	// resource patched, set when the status is pass; TargetSubresource
	// is the subresource it is written through when the policy's target
	// rules select it as one (a MutatingPolicy's pods/resize: "resize").
	Target            *ResourceRef
	PatchedTarget     map[string]any
	TargetSubresource string
	// Generated are, for a generate rule that passed, the downstream
	// objects it wants to exist.
	Generated []generate.DesiredObject
	// Warnings are messages for the admission response beyond the rule's
	// result, e.g. a verifyImages image skipped by skipImageReferences.
	Warnings []string
}

// ID returns the PolicyID of the response's policy: the responses of a
// ClusterPolicy and a ValidatingPolicy of one name share a Key, not an ID.
func (r *PolicyResponse) ID() string {
	if r.Policy == nil {
		return r.Key
	}
	return policyid.For(r.Policy.GetKind(), r.Key)
}
