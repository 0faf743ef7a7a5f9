package background

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/engine/gpol"
	"github.com/charter-dev/charter/engine/policyid"
)

// errTriggerGone says a trigger no longer exists (or exists under another
// UID: it was replaced).
var errTriggerGone = errors.New("trigger not found")

// generate carries out a generate rule for a trigger
// (mutate-generate-semantics §8.3, background-cleanup §3): a passing rule's
// objects are created, or brought back in line when the rule
// synchronizes; when the trigger is gone or the rule no longer applies to
// it, a synchronized rule's downstream objects for that trigger are
// deleted.
func (c *Controller) generate(ctx context.Context, w workItem, snap *snapshot) error {
	compiled := c.compiled.Load()
	p := compiled.byID[w.policy]
	rule := ruleOf(p, w.rule)
	if rule == nil || !rule.HasGenerate() {
		// The policy or rule went away since; policy sync cleans up.
		return nil
	}
	sync := rule.Generation.Synchronize
	if (w.deleteDownstream || w.sourceGone != "" || w.fromDownstream) && !sync {
		return nil
	}
	if w.sourceGone != "" {
		// A synchronized GeneratingPolicy's clones go with their
		// source (requeueClones).
		return c.deleteClones(ctx, p, rule, w.trigger, w.sourceGone)
	}
	// An UpdateRequest's word that the trigger went away or stopped
	// matching (deleteDownstream) is not taken on trust: the review it
	// came from may be forged. The trigger is read below, and its
	// downstream objects go only when it is gone or the rule no longer
	// applies to it as it is.
	if snap != nil && operationOf(snap) == kyvernov1.Delete && !w.deleteDownstream {
		return c.generateOnDelete(ctx, w, snap, p, rule)
	}
	trigger, err := snap.subresourceTrigger(), error(nil)
	if trigger == nil {
		trigger, err = c.fetchTrigger(ctx, w.trigger)
	}
	switch {
	case errors.Is(err, errTriggerGone) && snap != nil && operationOf(snap) == kyvernov1.Create:
		// Admission saw the CREATE before the object was stored: it may not
		// be visible yet, or another webhook denied it.
		return fmt.Errorf("%s with uid %s not found (yet); if the admission request was denied, this UpdateRequest fails for good", w.trigger, w.trigger.UID)
	case errors.Is(err, errTriggerGone) && rule.NamesOperation(kyvernov1.Delete) && !w.deleteDownstream:
		// A rule that generates on DELETE made its objects from a trigger
		// that is gone by design: they stay.
		return nil
	case errors.Is(err, errTriggerGone):
		var err error
		if sync {
			err = c.deleteDownstream(ctx, p, rule, &w.trigger)
		}
		if w.pruneStale {
			err = errors.Join(err, c.pruneStale(ctx, p, rule, w.trigger, nil))
		}
		return err
	case err != nil:
		return fmt.Errorf("fetching trigger %s: %w", w.trigger, err)
	}
	ref := triggerFromObject(trigger)
	rr := c.generateFor(ctx, compiled, w, snap.request(trigger), snap.op())
	if rr == nil || rr.Status == engine.StatusFail || rr.Status == engine.StatusSkip {
		// The rule does not apply (any more) to this trigger. A
		// PolicyException's skip is the trigger's result.
		if rr != nil && rr.Name == engine.RuleException {
			c.reportRun(p, ref, []engine.RuleResponse{*rr})
		}
		var err error
		if sync {
			err = c.deleteDownstream(ctx, p, rule, &ref)
		}
		if w.pruneStale {
			err = errors.Join(err, c.pruneStale(ctx, p, rule, ref, nil))
		}
		return err
	}
	err = c.applyGenerated(ctx, p, rr, sync)
	if err == nil || rr.Status == engine.StatusError {
		// What was generated, or why the policy could not say; a failed
		// write is the UpdateRequest's to tell, and is retried.
		c.reportRun(p, ref, []engine.RuleResponse{*rr})
	}
	if err != nil || !(w.pruneStale || gpolSynchronized(p, rule)) {
		return err
	}
	// The new objects exist before the old ones go (a default-deny
	// NetworkPolicy renamed never leaves its namespace open).
	return c.pruneStale(ctx, p, rule, ref, rr.Generated)
}

// pruneStale handles the objects a generate rule generated for a trigger
// before its target changed (generate.TargetsChanged; for a synchronized
// GeneratingPolicy, also a change of the trigger: gpolSynchronized) and
// no longer generates (all of them when desired is nil): a rule that synchronizes
// and does not orphan deletes them, as it would when the rule were
// removed; any other rule releases them, removing every
// generate.kyverno.io label, LabelPolicyKind and
// app.kubernetes.io/managed-by, so that they no longer look managed and
// nothing syncs or deletes them later. Only p's objects are touched
// (ownsDownstream), never those of another policy of its name.
//
// Kyverno un-labels the old downstream objects whatever the rule's
// settings (background-cleanup.md §3.4): under synchronize that leaves
// objects the policy no longer describes in place; and it drops only the
// policy and rule labels, so they still say app.kubernetes.io/managed-by:
// kyverno.
func (c *Controller) pruneStale(ctx context.Context, p kyvernov1.PolicyInterface, rule *kyvernov1.Rule, trigger triggerRef, desired []generate.DesiredObject) error {
	w := c.watch.Load()
	if w == nil || trigger.UID == "" {
		return nil
	}
	type objectID struct {
		gr              schema.GroupResource
		namespace, name string
	}
	want := map[objectID]bool{}
	for i := range desired {
		u := unstructured.Unstructured{Object: desired[i].Object}
		_, mapping, err := c.resource(u.GetAPIVersion(), u.GetKind(), u.GetNamespace())
		if err != nil {
			continue
		}
		id := objectID{gr: mapping.Resource.GroupResource(), name: u.GetName()}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			id.namespace = u.GetNamespace()
		}
		want[id] = true
	}
	remove := rule.Generation.Synchronize && !rule.Generation.OrphanDownstreamOnPolicyDelete
	dyn, err := c.writer(p)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range w.downstreamFor(p, rule.Name, trigger.UID) {
		if want[objectID{gr: o.gvr.GroupResource(), namespace: o.meta.Namespace, name: o.meta.Name}] {
			continue
		}
		mapping := &meta.RESTMapping{Resource: o.gvr}
		if gvk, err := c.mapper.KindFor(o.gvr); err == nil {
			mapping.GroupVersionKind = gvk
		}
		ri := dyn.Resource(o.gvr).Namespace(o.meta.Namespace)
		c.stats.Writes.Add(1)
		if remove {
			if err := ri.Delete(ctx, o.meta.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, c.describe(err, "delete", mapping, o.meta.Namespace, o.meta.Name))
				continue
			}
			c.policyEvent(policyid.Of(p), "Normal", ReasonDownstreamRetargeted, fmt.Sprintf("rule %s now generates other objects%s: deleted %s %s, which it generated before (synchronize: true)",
				rule.Name, forTrigger(trigger), mapping.GroupVersionKind.Kind, objectName(o.meta.Namespace, o.meta.Name)))
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": releasedLabels(o.meta.Labels)}})
		if err != nil {
			return err
		}
		if _, err := ri.Patch(ctx, o.meta.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, c.describe(err, "patch", mapping, o.meta.Namespace, o.meta.Name))
			continue
		}
		c.policyEvent(policyid.Of(p), "Normal", ReasonDownstreamRetargeted, fmt.Sprintf("rule %s now generates other objects%s: released %s %s, which it generated before (its generate.kyverno.io labels are removed; it is no longer synchronized or deleted with its trigger)",
			rule.Name, forTrigger(trigger), mapping.GroupVersionKind.Kind, objectName(o.meta.Namespace, o.meta.Name)))
	}
	return errors.Join(errs...)
}

// forTrigger names a trigger in an event's message, when its name is
// known.
func forTrigger(t triggerRef) string {
	if t.Name == "" {
		return ""
	}
	return " for " + t.String()
}

// releasedLabels is the merge patch of labels that releases a downstream
// object: every generate.kyverno.io label, LabelPolicyKind and Kyverno's
// managed-by removed.
func releasedLabels(l map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range l {
		if strings.HasPrefix(k, generate.LabelPrefix) || k == LabelPolicyKind || (k == generate.LabelManagedBy && v == generate.ManagedBy) {
			out[k] = nil
		}
	}
	return out
}

// generateFor runs one generate rule of a policy for a request.
func (c *Controller) generateFor(ctx context.Context, compiled *compiledPolicies, w workItem, req *engine.Request, op kyvernov1.AdmissionOperation) *engine.RuleResponse {
	resp := compiled.set.Generate(ctx, req, engine.WithLoaders(c.loaders))
	c.observeGenerating(resp, w.policy, op)
	return ruleResponse(resp.Policies, w.policy, w.rule)
}

// generateOnDelete carries out a rule that generates when its trigger is
// deleted (its match names the DELETE operation), from the deleted object
// the UpdateRequest recorded, once the delete really happened
// (background-cleanup.md §2.7).
func (c *Controller) generateOnDelete(ctx context.Context, w workItem, snap *snapshot, p kyvernov1.PolicyInterface, rule *kyvernov1.Rule) error {
	if snap.oldObject == nil {
		return fmt.Errorf("the UpdateRequest of the deletion of %s holds no deleted object", w.trigger)
	}
	switch _, err := c.fetchTrigger(ctx, w.trigger); {
	case err == nil:
		return fmt.Errorf("%s with uid %s still exists in the cluster; the delete request may have been rejected by the API server", w.trigger, w.trigger.UID)
	case !errors.Is(err, errTriggerGone):
		return fmt.Errorf("fetching trigger %s: %w", w.trigger, err)
	}
	req := snap.request(snap.oldObject)
	req.Operation, req.OldObject = kyvernov1.Delete, snap.oldObject
	rr := c.generateFor(ctx, c.compiled.Load(), w, req, kyvernov1.Delete)
	if rr == nil || rr.Status == engine.StatusFail || rr.Status == engine.StatusSkip {
		return nil
	}
	return c.applyGenerated(ctx, p, rr, rule.Generation.Synchronize)
}

// applyGenerated makes the objects of a rule response of p exist.
func (c *Controller) applyGenerated(ctx context.Context, p kyvernov1.PolicyInterface, rr *engine.RuleResponse, sync bool) error {
	if rr.Status != engine.StatusPass {
		return errors.New(rr.Message)
	}
	var errs []error
	for i := range rr.Generated {
		if src := rr.Generated[i].Source; src != nil && sync {
			// A synchronized clone follows its source.
			if _, mapping, err := c.resource(src.APIVersion, src.Kind, src.Namespace); err == nil {
				if w := c.watch.Load(); w != nil {
					w.ensureSource(mapping.Resource, src.Namespace)
				}
			}
		}
		if err := c.applyDesired(ctx, p, &rr.Generated[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ruleResponse finds the response of one rule of one policy (by
// policyid.Of).
func ruleResponse(policies []engine.PolicyResponse, id, rule string) *engine.RuleResponse {
	for i := range policies {
		if policies[i].ID() != id {
			continue
		}
		_, gpol := policies[i].Policy.(policiesv1.GeneratingPolicyLike)
		for j := range policies[i].Rules {
			// A GeneratingPolicy's one rule answers as "exception" when a
			// PolicyException decided it.
			if name := policies[i].Rules[j].Name; name == rule || gpol && name == engine.RuleException {
				return &policies[i].Rules[j]
			}
		}
	}
	return nil
}

func policyRefOf(p kyvernov1.PolicyInterface) generate.PolicyRef {
	ref := generate.PolicyRef{Name: p.GetName()}
	if p.IsNamespaced() {
		ref.Namespace = p.GetNamespace()
	}
	return ref
}

func triggerFromObject(obj map[string]any) triggerRef {
	u := unstructured.Unstructured{Object: obj}
	return triggerRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID()}
}

// resource returns the client of a kind's objects in a namespace.
func (c *Controller) resource(apiVersion, kind, namespace string) (dynamic.ResourceInterface, *meta.RESTMapping, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, nil, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	mapping, err := c.mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s is not served: %w", apiVersion, kind, err)
	}
	res := c.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return res.Namespace(namespace), mapping, nil
	}
	return res, mapping, nil
}

// fetchTrigger reads a trigger as it is now: by name when known, else by
// UID among the objects of its kind in its namespace.
func (c *Controller) fetchTrigger(ctx context.Context, t triggerRef) (map[string]any, error) {
	ri, mapping, err := c.resource(t.APIVersion, t.Kind, t.Namespace)
	if err != nil {
		return nil, err
	}
	if t.Name == "" {
		if t.Name, err = c.nameOf(ctx, mapping.Resource, t.Namespace, t.UID); err != nil {
			return nil, c.describe(err, "list", mapping, t.Namespace, "")
		}
		if t.Name == "" {
			return nil, errTriggerGone
		}
	}
	obj, err := ri.Get(ctx, t.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, errTriggerGone
	case err != nil:
		return nil, c.describe(err, "get", mapping, t.Namespace, t.Name)
	case t.UID != "" && obj.GetUID() != t.UID, obj.GetDeletionTimestamp() != nil:
		return nil, errTriggerGone
	}
	return obj.Object, nil
}

// applyDesired makes a desired downstream object of p exist, labelled
// with p's kind (LabelPolicyKind): created when missing; when it exists
// and the rule synchronizes, brought back in line with server-side apply
// if it drifted (which adds the kind label to an object an older charter
// generated). An object there that the policy did not generate, or that
// is not provably its (ownsDownstream), is left alone and the policy
// gets an event.
func (c *Controller) applyDesired(ctx context.Context, p kyvernov1.PolicyInterface, d *generate.DesiredObject) error {
	if err := checkGeneratedScope(d); err != nil {
		return err
	}
	withPolicyKind(d.Object, p)
	u := &unstructured.Unstructured{Object: d.Object}
	ri, mapping, err := c.writeResource(p, u.GetAPIVersion(), u.GetKind(), u.GetNamespace())
	if err != nil {
		return err
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		if d.Policy.Namespace != "" {
			// Tenancy: a namespaced policy writes into its own namespace
			// only, and a cluster-scoped object is in none.
			return fmt.Errorf("rule %s: %s %s is cluster-scoped: a namespaced policy generates only into its own namespace %s", d.Rule, u.GetKind(), u.GetName(), d.Policy.Namespace)
		}
		// A GeneratingPolicy names a namespace for every object it
		// generates; a cluster-scoped object takes none.
		u.SetNamespace("")
	} else if u.GetNamespace() == "" {
		return fmt.Errorf("rule %s: %s %s is namespaced and names no namespace", d.Rule, u.GetKind(), u.GetName())
	}
	cur, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return c.describe(err, "get", mapping, u.GetNamespace(), u.GetName())
	default:
		if !c.ownsDownstream(cur.GetLabels(), p, "") {
			c.policyEvent(policyid.Of(p), "Warning", ReasonDownstreamExists, fmt.Sprintf(
				"rule %s: %s %s already exists and was not generated by this policy (%s); charter leaves it alone instead of taking it over",
				d.Rule, u.GetKind(), objectName(u.GetNamespace(), u.GetName()), c.foreignDownstream(cur.GetLabels(), p)))
			return nil
		}
		if !(d.Synchronize || d.Reapply) || contains(cur.Object, d.Object) {
			return nil
		}
	}
	c.stats.Writes.Add(1)
	// Objects generated by Kyverno or an older charter may carry fields
	// other managers own: force takes them over, as the rule's output is
	// authoritative for a synchronized object.
	if _, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		verb := "patch"
		if cur == nil {
			verb = "create"
		}
		return c.describe(err, verb, mapping, u.GetNamespace(), u.GetName())
	}
	return nil
}

func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// deleteDownstream deletes what a rule generated, for one trigger or
// (trigger nil) for every trigger, found by its generate.kyverno.io
// labels among the kinds the rule generates; of those, only the objects
// provably the policy's (ownsDownstream: LabelPolicyKind, or no other
// policy of its name with that rule) go.
func (c *Controller) deleteDownstream(ctx context.Context, policy kyvernov1.PolicyInterface, rule *kyvernov1.Rule, trigger *triggerRef) error {
	return c.deleteLabelled(ctx, policy, rule, trigger, nil)
}

// deleteClones deletes what a rule generated for a trigger by cloning
// the source of uid (its generate.kyverno.io/source-uid label), once the
// source is gone.
func (c *Controller) deleteClones(ctx context.Context, policy kyvernov1.PolicyInterface, rule *kyvernov1.Rule, trigger triggerRef, uid types.UID) error {
	return c.deleteLabelled(ctx, policy, rule, &trigger, labels.Set{generate.LabelSourceUID: string(uid)})
}

// deleteLabelled is deleteDownstream of the objects that also carry the
// labels extra.
func (c *Controller) deleteLabelled(ctx context.Context, policy kyvernov1.PolicyInterface, rule *kyvernov1.Rule, trigger *triggerRef, extra labels.Set) error {
	p := policyRefOf(policy)
	set := labels.Set{generate.LabelPolicyName: p.Name, generate.LabelPolicyNamespace: p.Namespace, generate.LabelRuleName: rule.Name}
	if trigger != nil {
		// Kyverno matches the trigger by uid, namespace, kind, group and
		// version; the uid alone is unique.
		set[generate.LabelTriggerUID] = string(trigger.UID)
	}
	for k, v := range extra {
		set[k] = v
	}
	selector := labels.SelectorFromSet(set).String()
	dyn, err := c.writer(policy)
	if err != nil {
		return err
	}
	var errs []error
	for _, kind := range generatedKinds(policy, rule) {
		types := c.kinds.Resolve(kind)
		for _, t := range types {
			list, err := c.meta.Resource(t.GVR).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				errs = append(errs, c.describe(err, "list", &meta.RESTMapping{Resource: t.GVR, GroupVersionKind: t.GVR.GroupVersion().WithKind(t.Kind)}, "", ""))
				continue
			}
			for i := range list.Items {
				o := &list.Items[i]
				if !c.ownsDownstream(o.Labels, policy, rule.Name) {
					continue
				}
				ri := dyn.Resource(t.GVR).Namespace(o.Namespace)
				c.stats.Writes.Add(1)
				if err := ri.Delete(ctx, o.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					errs = append(errs, c.describe(err, "delete", &meta.RESTMapping{Resource: t.GVR, GroupVersionKind: t.GVR.GroupVersion().WithKind(t.Kind)}, o.Namespace, o.Name))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// generatedKinds lists the kinds a generate rule writes, as kind selectors
// ("networking.k8s.io/v1/NetworkPolicy"). Kinds with variables are left
// out: their objects are found only through the rule's output. A
// GeneratingPolicy's one rule writes the kinds its expressions name
// literally (the engine refuses to synchronize any other).
func generatedKinds(p kyvernov1.PolicyInterface, rule *kyvernov1.Rule) []string {
	if kinds := gpol.GeneratedKinds(p); kinds != nil {
		return kinds
	}
	g := rule.Generation
	var out []string
	add := func(apiVersion, kind string) {
		if kind == "" || strings.Contains(kind+apiVersion, "{{") {
			return
		}
		if apiVersion == "" {
			out = append(out, kind)
			return
		}
		out = append(out, apiVersion+"/"+kind)
	}
	pattern := func(gp *kyvernov1.GeneratePattern) {
		if len(gp.CloneList.Kinds) > 0 {
			for _, k := range gp.CloneList.Kinds {
				add("", k)
			}
			return
		}
		add(gp.APIVersion, gp.Kind)
	}
	if len(g.ForEachGeneration) > 0 {
		for i := range g.ForEachGeneration {
			pattern(&g.ForEachGeneration[i].GeneratePattern)
		}
	} else {
		pattern(&g.GeneratePattern)
	}
	return out
}
