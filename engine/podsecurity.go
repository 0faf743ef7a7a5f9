package engine

import (
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// podSecurity evaluates a validate.podSecurity rule. Until engine/podsecurity
// exposes its evaluator the rule reports an error naming the missing
// feature, never a silent pass.
func (ev *evaluation) podSecurity(r *rule, ps *kyvernov1.PodSecurity, resource map[string]any) outcome {
	return errorf("validate.podSecurity is not supported by charter yet; rule %s was not evaluated", r.name)
}
