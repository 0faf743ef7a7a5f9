package background

import (
	"k8s.io/apimachinery/pkg/api/equality"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/policyid"
)

// A GeneratingPolicy (cel-policy-types.md §3.3.3) reaches this controller
// as one synthetic generate rule named after it
// (GeneratingPolicySpec.KyvernoSpec): admission's UpdateRequests,
// generateExisting, synchronize and orphanDownstreamOnPolicyDelete go
// the way of a ClusterPolicy's generate rule. Its generate rule has no
// target fields, so a policy edit that changes what it generates is told
// by gpolGenerationChanged instead of generate.TargetsChanged; it is then
// retargeted like a ClusterPolicy rule: the new objects are generated for
// every trigger, and the ones no longer generated are deleted
// (synchronize without orphanDownstreamOnPolicyDelete) or released.

// gpolSynchronized reports whether rule is a synchronized
// GeneratingPolicy's: its objects for a trigger are what its latest run
// for the trigger generated. A trigger UPDATE that changes what it
// generates (another name, namespace or kind, read from the trigger) thus
// retargets it as a policy edit does: the new objects are applied, then
// those no longer generated for the trigger are deleted (or released
// under orphanDownstreamOnPolicyDelete; pruneStale). Every run prunes, so
// an update admission missed is caught up by the next resync. A trigger
// that no longer passes the matchConditions has its objects deleted
// (engine: "trigger no longer matches"), as Kyverno does under
// synchronize. A ClusterPolicy rule prunes only after a policy edit.
func gpolSynchronized(p kyvernov1.PolicyInterface, rule *kyvernov1.Rule) bool {
	_, ok := p.(policiesv1.GeneratingPolicyLike)
	return ok && rule.Generation.Synchronize
}

// gpolGenerationChanged reports whether an edit of a GeneratingPolicy
// may have changed the objects it generates: its generate entries
// (expressions or templates) or the variables they read. false for other
// policies.
func gpolGenerationChanged(prev, cur kyvernov1.PolicyInterface) bool {
	p, ok1 := prev.(policiesv1.GeneratingPolicyLike)
	c, ok2 := cur.(policiesv1.GeneratingPolicyLike)
	if !ok1 || !ok2 {
		return false
	}
	ps, cs := p.GetGeneratingPolicySpec(), c.GetGeneratingPolicySpec()
	return !equality.Semantic.DeepEqual(ps.Generation, cs.Generation) || !equality.Semantic.DeepEqual(ps.Variables, cs.Variables)
}

// observeGenerating hands the response of the GeneratingPolicy id, if
// resp holds one, to Options.Metrics: Kyverno counts every
// GeneratingPolicy run of its background controller
// (kyverno_generating_policy_*). A ClusterPolicy's generate rules are not
// counted here.
func (c *Controller) observeGenerating(resp *engine.GenerateResponse, id string, op kyvernov1.AdmissionOperation) {
	if c.opts.Metrics == nil {
		return
	}
	for i := range resp.Policies {
		if pr := &resp.Policies[i]; pr.ID() == id {
			if _, ok := pr.Policy.(policiesv1.GeneratingPolicyLike); ok {
				c.opts.Metrics.ObserveGenerating(resp.Resource, string(op), *pr)
			}
			return
		}
	}
}

// reportRun hands the responses of a GeneratingPolicy or mutate-existing
// MutatingPolicy run for a trigger to Options.Results, for the trigger's
// report (generated-resources, patched-target). A ClusterPolicy's
// generate and mutate-existing rules are not reported.
func (c *Controller) reportRun(p kyvernov1.PolicyInterface, trigger triggerRef, rules []engine.RuleResponse) {
	if c.opts.Results == nil || trigger.UID == "" || len(rules) == 0 || matchConstraintsOf(p) == nil {
		return
	}
	c.opts.Results.Results(trigger.objectRef(), []engine.PolicyResponse{{Policy: p, Key: policyid.Key(p), Rules: rules}})
}
