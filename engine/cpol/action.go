package cpol

import (
	"github.com/charter-dev/charter/api/charter"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/wildcard"
)

// action resolves the effective failure action of a validate rule, most
// specific first: the rule's failureActionOverrides, its failureAction,
// the policy's validationFailureActionOverrides, then the policy's
// validationFailureAction (Audit when unset).
//
// A staged policy (charter.dev/staged: "true") is promoted to Enforce in a
// namespace labelled charter.dev/enforcement=enforce. An explicit override
// that covers the namespace, the rule's or the policy's, is a decision
// about that very namespace written into the policy, so it wins over the
// label: the rule then resolves exactly as it would unstaged. The label
// only promotes: "audit", any other value or no label leave the policy's
// own action in place, so a namespace owner cannot relax an Enforce
// policy by labelling the namespace.
func (ev *evaluation) action(r *rule) review.Action {
	v := r.validate
	if v != nil {
		if a, ok := ev.override(v.overrides); ok {
			return a
		}
	}
	spec := ev.policy.spec
	if ev.promoted() {
		if _, ok := ev.override(spec.ValidationFailureActionOverrides); !ok {
			return review.Enforce
		}
	}
	if v != nil && v.failureAction != nil && v.failureAction.IsValid() {
		return normalizeAction(*v.failureAction)
	}
	if a, ok := ev.override(spec.ValidationFailureActionOverrides); ok {
		return a
	}
	return normalizeAction(spec.ValidationFailureAction)
}

// promoted reports whether the policy is staged and the request's
// namespace is labelled for enforcement. Namespace labels are looked up
// only for staged policies; a cluster-scoped resource has none, so staged
// policies keep their own action on it.
func (ev *evaluation) promoted() bool {
	return ev.policy.staged && charter.Enforces(ev.in.NamespaceLabels())
}

// override returns the action of the first valid override that covers the
// request's namespace: its namespaces (wildcards) and namespaceSelector
// must both match when set; an override with neither covers every
// namespace.
func (ev *evaluation) override(overrides []kyvernov1.ValidationFailureActionOverride) (review.Action, bool) {
	for i := range overrides {
		o := &overrides[i]
		if !o.Action.IsValid() {
			continue
		}
		if len(o.Namespaces) > 0 && !anyWildcard(o.Namespaces, ev.in.Res.Namespace) {
			continue
		}
		if o.NamespaceSelector != nil && !match.Selector(o.NamespaceSelector, ev.in.NamespaceLabels()) {
			continue
		}
		return normalizeAction(o.Action), true
	}
	return "", false
}

func normalizeAction(a kyvernov1.ValidationFailureAction) review.Action {
	if a.Enforce() {
		return review.Enforce
	}
	return review.Audit
}

func anyWildcard(patterns []string, s string) bool {
	for _, p := range patterns {
		if wildcard.Match(p, s) {
			return true
		}
	}
	return false
}
