package engine

import (
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/wildcard"
)

// action resolves the effective failure action of a validate rule, most
// specific first: the rule's failureActionOverrides, its failureAction,
// the policy's validationFailureActionOverrides, then the policy's
// validationFailureAction (Audit when unset).
func (ev *evaluation) action(r *rule) Action {
	v := r.validate
	if v != nil {
		if a, ok := ev.override(v.overrides); ok {
			return a
		}
		if v.failureAction != nil && v.failureAction.IsValid() {
			return normalizeAction(*v.failureAction)
		}
	}
	spec := ev.policy.spec
	if a, ok := ev.override(spec.ValidationFailureActionOverrides); ok {
		return a
	}
	return normalizeAction(spec.ValidationFailureAction)
}

// override returns the action of the first valid override that covers the
// request's namespace: its namespaces (wildcards) and namespaceSelector
// must both match when set; an override with neither covers every
// namespace.
func (ev *evaluation) override(overrides []kyvernov1.ValidationFailureActionOverride) (Action, bool) {
	for i := range overrides {
		o := &overrides[i]
		if !o.Action.IsValid() {
			continue
		}
		if len(o.Namespaces) > 0 && !anyWildcard(o.Namespaces, ev.in.res.Namespace) {
			continue
		}
		if o.NamespaceSelector != nil && !match.Selector(o.NamespaceSelector, ev.in.namespaceLabels()) {
			continue
		}
		return normalizeAction(o.Action), true
	}
	return "", false
}

func normalizeAction(a kyvernov1.ValidationFailureAction) Action {
	if a.Enforce() {
		return Enforce
	}
	return Audit
}

func anyWildcard(patterns []string, s string) bool {
	for _, p := range patterns {
		if wildcard.Match(p, s) {
			return true
		}
	}
	return false
}
