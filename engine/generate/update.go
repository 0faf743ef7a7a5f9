package generate

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// ImmutableRuleError is a policy update that changes a field of a kept
// generate rule that cannot change in place (background-cleanup.md §3.4):
// the objects it already generated would no longer match what the rule
// says, with nothing to bring them in line.
type ImmutableRuleError struct {
	// Index is the rule's index in the new spec.rules.
	Index int
	// Rule is the rule's name.
	Rule string
	// Fields are the rule's fields that changed (match, preconditions,
	// ...), sorted.
	Fields []string
}

func (e *ImmutableRuleError) Error() string {
	return fmt.Sprintf("spec.rules[%d] (generate rule %q): changes of immutable fields of a rule spec in a generate rule is disallowed: %s changed; "+
		"only generate's data, foreach, synchronize, orphanDownstreamOnPolicyDelete, generateExisting and its target (apiVersion, kind, name, namespace, clone, cloneList) may change in place: "+
		"to change the rest, delete the policy and create it again, or add the new version as a rule of another name",
		e.Index, e.Rule, strings.Join(e.Fields, ", "))
}

// CheckUpdate judges a policy update's generate rules as Kyverno's policy
// admission does (background-cleanup.md §3.4), rule by rule: a kept
// generate rule (same name) whose target changed (TargetsChanged) is
// allowed with a warning saying what becomes of the objects generated
// from the old target (reconciler/background deletes them under
// synchronize without orphanDownstreamOnPolicyDelete, and releases them
// otherwise); one whose target is unchanged may not change any field
// outside generate, except match when no generate rule of the old policy
// synchronizes. Each such rule is one *ImmutableRuleError, joined.
//
// Kyverno compares hashes of the whole rule set: once any rule's target
// changes, nothing else is checked, so one retargeted rule lets every
// other rule's match change unnoticed; a renamed rule is refused; and its
// message names neither the rule nor the field. charter checks each kept
// rule on its own, names the fields, and treats a renamed rule as one
// removed (its synchronized objects deleted unless orphaned) and one
// added, which is what the background controller does with it.
func CheckUpdate(old, cur []kyvernov1.Rule) (warnings []string, err error) {
	oldSynchronizes := slices.ContainsFunc(old, func(r kyvernov1.Rule) bool {
		return r.HasGenerate() && r.Generation.Synchronize
	})
	var errs []error
	for i := range cur {
		now := &cur[i]
		if !now.HasGenerate() {
			continue
		}
		j := slices.IndexFunc(old, func(r kyvernov1.Rule) bool { return r.Name == now.Name })
		if j < 0 || !old[j].HasGenerate() {
			continue
		}
		was := &old[j]
		if TargetsChanged(was.Generation, now.Generation) {
			warnings = append(warnings, retargetWarning(i, was, now))
			continue
		}
		if fields := changedRuleFields(was, now, !oldSynchronizes); len(fields) > 0 {
			errs = append(errs, &ImmutableRuleError{Index: i, Rule: now.Name, Fields: fields})
		}
	}
	return warnings, joinErrors(errs)
}

func retargetWarning(i int, was, now *kyvernov1.Rule) string {
	fate := "releases the objects generated from the old target: they stay, without their generate.kyverno.io labels, and are no longer synchronized or deleted with their trigger"
	if g := now.Generation; g.Synchronize && !g.OrphanDownstreamOnPolicyDelete {
		fate = "deletes the objects generated from the old target once the new ones exist (synchronize: true, orphanDownstreamOnPolicyDelete: false)"
	}
	return fmt.Sprintf("spec.rules[%d] (generate rule %q) now generates %s instead of %s: charter's background controller %s",
		i, now.Name, strings.Join(Targets(now.Generation), "; "), strings.Join(Targets(was.Generation), "; "), fate)
}

// changedRuleFields lists the fields of a rule, outside generate (and
// outside match when ignoreMatch), whose values differ.
func changedRuleFields(was, now *kyvernov1.Rule, ignoreMatch bool) []string {
	a, b := ruleFields(was, ignoreMatch), ruleFields(now, ignoreMatch)
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		if !reflect.DeepEqual(a[k], b[k]) {
			out = append(out, k)
		}
	}
	return out
}

func ruleFields(r *kyvernov1.Rule, ignoreMatch bool) map[string]any {
	c := r.DeepCopy()
	c.Generation = nil
	if ignoreMatch {
		c.MatchResources = kyvernov1.MatchResources{}
	}
	raw, err := json.Marshal(c)
	if err != nil {
		return map[string]any{"(unreadable rule)": err.Error()}
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return map[string]any{"(unreadable rule)": err.Error()}
	}
	return out
}

func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}
