package background

import (
	"context"
	"iter"
	"maps"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/engine/policyid"
)

// compiledPolicies is one compiled generation of the policies with
// generate or mutate-existing rules.
type compiledPolicies struct {
	set *engine.PolicySet
	// byID holds the policies by policyid.Of: a ClusterPolicy and a
	// GeneratingPolicy of one name are two policies.
	byID map[string]kyvernov1.PolicyInterface
	// held are the policies still installed that no longer compile, each
	// as it last compiled (as installed, if it never did here). They run
	// nothing, and their downstream objects stay: a policy edit that does
	// not compile is not a deletion (that would delete every synchronized
	// object, NetworkPolicies included, until the policy is fixed). Once
	// fixed, or deleted, a held policy is compared with the version that
	// last compiled.
	held map[string]kyvernov1.PolicyInterface
}

// lastCompiled yields every policy as it last compiled: served and held.
func (cp *compiledPolicies) lastCompiled() iter.Seq2[string, kyvernov1.PolicyInterface] {
	return func(yield func(string, kyvernov1.PolicyInterface) bool) {
		for _, m := range []map[string]kyvernov1.PolicyInterface{cp.byID, cp.held} {
			for id, p := range m {
				if !yield(id, p) {
					return
				}
			}
		}
	}
}

// last returns the policy of id as it last compiled: served or held.
func (cp *compiledPolicies) last(id string) kyvernov1.PolicyInterface {
	if p, ok := cp.byID[id]; ok {
		return p
	}
	return cp.held[id]
}

// take makes the background view of a policy snapshot current: the
// policies with generate or mutate-existing rules, bound to both groups'
// exceptions, as the process's policy cache compiled them
// (policycache.Snapshot.Background). A policy that does not compile is
// held; its status says why (the policy status controller reads the same
// snapshot).
func (c *Controller) take(s *policycache.Snapshot) *compiledPolicies {
	view := s.Background
	out := &compiledPolicies{set: view.Set, byID: map[string]kyvernov1.PolicyInterface{}, held: map[string]kyvernov1.PolicyInterface{}}
	for _, f := range view.Errors {
		c.log.Info("policy left out of background processing", "fault", f.Error())
	}
	prev := c.compiled.Load()
	for _, u := range view.Units {
		id, p := u.ID(), u.Source()
		if _, served := view.Set.Lookup(id); served {
			out.byID[id] = p
			continue
		}
		if last := prev.last(id); last != nil && last.GetUID() == p.GetUID() {
			p = last
		}
		out.held[id] = p
	}
	c.compiled.Store(out)
	return out
}

// ruleOf finds a rule of a policy by name.
func ruleOf(p kyvernov1.PolicyInterface, name string) *kyvernov1.Rule {
	if p == nil {
		return nil
	}
	rules := p.GetSpec().Rules
	for i := range rules {
		if rules[i].Name == name {
			return &rules[i]
		}
	}
	return nil
}

// policiesChanged brings the cluster in line with a policy change: every
// policy of cur that is new or changed since changedSince re-syncs its
// synchronized downstream objects, generates for existing triggers
// (generateExisting) and mutates existing targets
// (mutateExistingOnPolicyUpdate); every synchronized generate rule of
// deletedSince that is gone from cur, or is no longer a generate rule
// there, deletes its downstream objects, unless
// orphanDownstreamOnPolicyDelete, as if its policy were deleted. A kept generate rule whose
// target changed since deletedSince (generate.TargetsChanged; for a
// GeneratingPolicy, gpolGenerationChanged) generates the new target for
// every trigger it generated for, and the old objects are deleted or
// released (pruneStale).
func (r *run) policiesChanged(ctx context.Context, changedSince, cur, deletedSince *compiledPolicies) {
	c := r.c
	ids := slices.Sorted(maps.Keys(cur.byID))
	for _, id := range ids {
		p := cur.byID[id]
		rules := p.GetSpec().Rules
		for i := range rules {
			if rules[i].HasGenerate() {
				r.watch.ensureDownstream(p, &rules[i])
			}
		}
		if prev, ok := changedSince.byID[id]; ok && prev.GetUID() == p.GetUID() && prev.GetGeneration() == p.GetGeneration() {
			continue
		}
		spec := p.GetSpec()
		prev := deletedSince.last(id)
		if prev != nil && prev.GetUID() != p.GetUID() {
			prev = nil
		}
		for i := range rules {
			rule := &rules[i]
			switch {
			case rule.HasGenerate():
				retargeted := false
				if old := ruleOf(prev, rule.Name); old != nil && old.HasGenerate() &&
					(generate.TargetsChanged(old.Generation, rule.Generation) || gpolGenerationChanged(prev, p)) {
					// The objects generated from the old target are found
					// through watches of the kinds it wrote.
					retargeted = true
					r.watch.ensureDownstream(prev, old)
				}
				if rule.Generation.Synchronize || retargeted {
					for _, w := range r.watch.downstreamOf(p, rule.Name) {
						w.pruneStale = retargeted
						r.work.Add(w)
					}
				}
				switch {
				case spec.RuleGenerateExisting(rule):
					r.enqueueTriggers(ctx, p, rule, kyvernov2.Generate, nil)
				case rule.Generation.Synchronize:
					// Triggers created after the policy should have come
					// through admission; one it missed is caught up here. A
					// rule without synchronize leaves older triggers, and
					// downstream objects a user deleted, alone.
					r.enqueueTriggers(ctx, p, rule, kyvernov2.Generate, func(o *metav1.PartialObjectMetadata) bool {
						return createdAfter(o.CreationTimestamp.Time, p)
					})
				}
			case rule.HasMutateExisting():
				if spec.RuleMutateExistingOnPolicyUpdate(rule) {
					r.enqueueTriggers(ctx, p, rule, kyvernov2.Mutate, nil)
				}
			}
		}
	}
	for id, old := range deletedSince.lastCompiled() {
		if h := cur.held[id]; h != nil && h.GetUID() == old.GetUID() {
			c.log.Info("policy does not compile; its downstream objects are kept until it is fixed or deleted", "policy", id)
			continue
		}
		now := cur.byID[id]
		if now != nil && now.GetUID() != old.GetUID() {
			now = nil
		}
		rules := old.GetSpec().Rules
		for i := range rules {
			rule := &rules[i]
			if !rule.HasGenerate() || !rule.Generation.Synchronize || rule.Generation.OrphanDownstreamOnPolicyDelete {
				continue
			}
			if kept := ruleOf(now, rule.Name); kept != nil && kept.HasGenerate() {
				continue
			}
			if err := c.deleteDownstream(ctx, old, rule, nil); err != nil {
				c.log.Error(err, "deleting the downstream objects of a deleted rule", "policy", id, "rule", rule.Name)
			}
		}
	}
}

// enqueueTriggers lists the existing objects a rule matches (its match
// kinds, in the policy's namespace for a Policy) and queues work for each
// that keep allows (all when nil); the work evaluates the rule.
func (r *run) enqueueTriggers(ctx context.Context, p kyvernov1.PolicyInterface, rule *kyvernov1.Rule, typ kyvernov2.RequestType, keep func(*metav1.PartialObjectMetadata) bool) {
	c := r.c
	key := policyid.Of(p)
	for _, sel := range matchKinds(p, rule) {
		types := c.kinds.Resolve(sel)
		if matchConstraintsOf(p) != nil {
			// A GeneratingPolicy's or MutatingPolicy's rule has no kinds:
			// its triggers are the resources of its matchConstraints (sel
			// is one of them).
			types = c.resolveResourceRule(sel)
		}
		if len(types) == 0 {
			c.log.Info("kind not served; no existing triggers of it", "policy", key, "rule", rule.Name, "kind", sel)
			continue
		}
		for _, t := range types {
			if p.IsNamespaced() && !t.Namespaced {
				// A namespaced policy's triggers are in its namespace.
				continue
			}
			objs, err := c.listMetadata(ctx, t.GVR, p.GetNamespace())
			if err != nil {
				c.log.Error(err, "listing existing triggers", "policy", key, "rule", rule.Name, "resource", t.GVR.String())
				c.policyEvent(key, "Warning", ReasonBackgroundFailed, "listing existing "+t.GVR.Resource+" for rule "+rule.Name+": "+err.Error())
				continue
			}
			for i := range objs {
				o := &objs[i]
				if keep != nil && !keep(o) {
					continue
				}
				r.work.Add(workItem{typ: typ, policy: key, rule: rule.Name, trigger: triggerRef{
					APIVersion: t.APIVersion(), Kind: t.Kind, Namespace: o.Namespace, Name: o.Name, UID: o.UID,
				}})
			}
		}
	}
}

// resolveResourceRule resolves the resources a GeneratingPolicy's or
// MutatingPolicy's matchConstraints name ("group/version/resource", as matchKinds lists
// them for it).
func (c *Controller) resolveResourceRule(sel string) []clusterstate.ResourceType {
	parts := strings.SplitN(sel, "/", 3)
	if len(parts) != 3 {
		return nil
	}
	return c.kinds.ResolveResource(parts[0], parts[1], parts[2])
}

// matchKinds lists the kind selectors of a rule's match block; for a
// GeneratingPolicy's or MutatingPolicy's rule, which has none,
// "group/version/resource" of each of the policy's resource rules.
func matchKinds(p kyvernov1.PolicyInterface, r *kyvernov1.Rule) []string {
	if mc := matchConstraintsOf(p); mc != nil {
		var out []string
		for _, rr := range mc.ResourceRules {
			for _, g := range rr.APIGroups {
				for _, v := range rr.APIVersions {
					for _, res := range rr.Resources {
						if sel := g + "/" + v + "/" + res; !slices.Contains(out, sel) {
							out = append(out, sel)
						}
					}
				}
			}
		}
		return out
	}
	return matchKindsOfRule(r)
}

// matchConstraintsOf returns the matchConstraints of a GeneratingPolicy or
// MutatingPolicy (of either scope), nil for other policies.
func matchConstraintsOf(p kyvernov1.PolicyInterface) *admissionregistrationv1.MatchResources {
	switch cp := p.(type) {
	case policiesv1.GeneratingPolicyLike:
		return cp.GetGeneratingPolicySpec().MatchConstraints
	case policiesv1.MutatingPolicyLike:
		return cp.GetMutatingPolicySpec().MatchConstraints
	}
	return nil
}

// matchKindsOfRule lists the kind selectors of a rule's match block.
func matchKindsOfRule(r *kyvernov1.Rule) []string {
	m := &r.MatchResources
	seen := map[string]bool{}
	var out []string
	add := func(kinds []string) {
		for _, k := range kinds {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	add(m.ResourceDescription.Kinds)
	for _, f := range m.Any {
		add(f.ResourceDescription.Kinds)
	}
	for _, f := range m.All {
		add(f.ResourceDescription.Kinds)
	}
	return out
}
