package mpol

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"google.golang.org/protobuf/types/known/structpb"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/review"
)

// mpolExisting is the mutate-existing part of a MutatingPolicy with
// evaluation.mutateExisting (cel-policy-types.md §3.3.2): an admission
// request its matchConstraints and matchConditions select is a trigger;
// the background controller then patches the existing targets, each
// evaluated as an UPDATE of itself. Its responses carry the policy's
// synthetic rule name (MutatingPolicySpec.KyvernoSpec), under which
// UpdateRequests and the background controller know the work.
type mpolExisting struct {
	rule string
	// trigger is matchConstraints for any operation: in the background
	// controller the trigger is the object as it is now, admission
	// having checked the operation when it created the UpdateRequest.
	trigger *celruntime.Constraints
	// resources are listed for targets when there is no target
	// expression: targetMatchConstraints' resource rules, else
	// matchConstraints'.
	resources []schema.GroupVersionResource
	// targets select the listed (or the expression's) objects: resource
	// rules, exclusions, selectors and resourceNames, for any operation.
	// nil for an expression without resource rules: its objects are the
	// targets.
	targets *celruntime.Constraints
}

// compileExisting compiles the mutate-existing part of a
// MutatingPolicy. Targets are listed by group, version and resource, so a
// resource rule that lists them must name them exactly: a wildcard or a
// subresource is refused here rather than silently matching nothing.
//
// A NamespacedMutatingPolicy (namespaced) that lists a built-in
// cluster-scoped resource is refused here too; a cluster-scoped object of
// another resource is refused per target when it is listed.
func compileExisting(spec *policiesv1.MutatingPolicySpec, rule string, namespaced bool, f *fault.Collector) *mpolExisting {
	ex := &mpolExisting{rule: rule}
	var err error
	if ex.trigger, err = celruntime.CompileConstraints(anyOperation(spec.MatchConstraints)); err != nil {
		// compileVariant reports matchConstraints' faults.
		return nil
	}
	tmc := spec.TargetMatchConstraints
	src, path := spec.MatchConstraints, "spec.matchConstraints"
	if tmc != nil && len(tmc.ResourceRules) > 0 {
		src, path = &tmc.MatchResources, "spec.targetMatchConstraints"
	}
	if tmc != nil && strings.TrimSpace(tmc.Expression) != "" {
		if len(tmc.ResourceRules) > 0 {
			if ex.targets, err = celruntime.CompileConstraints(anyOperation(&tmc.MatchResources)); err != nil {
				f.Add(path, err.Error())
			}
		}
		return ex
	}
	if ex.targets, err = celruntime.CompileConstraints(anyOperation(src)); err != nil {
		f.Add(path, err.Error())
		return ex
	}
	seen := map[schema.GroupVersionResource]bool{}
	for i, r := range src.ResourceRules {
		field := fmt.Sprintf("%s.resourceRules[%d]", path, i)
		for _, g := range r.APIGroups {
			for _, v := range r.APIVersions {
				for _, res := range r.Resources {
					if g == "*" || v == "*" || strings.ContainsAny(res, "*/") {
						f.Add(field, fmt.Sprintf("mutateExisting lists its targets by group, version and resource: %q/%q/%q names none exactly (no wildcards or subresources); "+
							"list the resources, or select targets with targetMatchConstraints", g, v, res))
						continue
					}
					if cluster, known := generate.KnownResourceScope(g, res, match.ResourceForKind); namespaced && known && cluster {
						f.Add(field, fmt.Sprintf("a namespaced policy cannot mutate the cluster-scoped resource %q", res))
						continue
					}
					gvr := schema.GroupVersionResource{Group: g, Version: v, Resource: res}
					if !seen[gvr] {
						seen[gvr] = true
						ex.resources = append(ex.resources, gvr)
					}
				}
			}
		}
	}
	return ex
}

// anyOperation is a copy of mc whose resource rules select every
// operation.
func anyOperation(mc *admissionregistrationv1.MatchResources) *admissionregistrationv1.MatchResources {
	if mc == nil {
		return nil
	}
	out := mc.DeepCopy()
	for i := range out.ResourceRules {
		out.ResourceRules[i].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
	}
	return out
}

// compileTargetSelection compiles, with the variant's compiler (so that
// they see the variables), the target expression and targetMatchConditions
// of a mutate-existing policy.
func compileTargetSelection(v *variant, spec *policiesv1.MutatingPolicySpec, path string, fields celruntime.Fields) {
	if tmc := spec.TargetMatchConstraints; tmc != nil && strings.TrimSpace(tmc.Expression) != "" {
		if p := fields.Program(&celruntime.Accessor{Expr: tmc.Expression, Returns: celruntime.AnyReturn()}, path+".targetMatchConstraints.expression"); p != nil {
			v.targetExpr = &celruntime.Program{Expr: tmc.Expression, Prog: p}
		}
	}
	if len(spec.TargetMatchConditions) == 0 {
		// Without targetMatchConditions a target passes the policy's own
		// matchConditions, as Kyverno's add-privileged-existing-namespaces
		// test shows (kube-system, excluded by a matchCondition, is not
		// patched when another namespace triggers the policy).
		v.targetConditions = v.conditions
		return
	}
	v.targetConditions = fields.Conditions(spec.TargetMatchConditions, path+".targetMatchConditions")
}

// mutateExisting is a mutate-existing MutatingPolicy's answer to a
// trigger. With background checks (admission deciding on an
// UpdateRequest) it is one pass response when matchConstraints and
// matchConditions select the request. Otherwise it selects the targets and
// returns one response per target: pass with the patched target when the
// mutations changed it, pass without one when they did not, skip when
// targetMatchConditions (or matchConditions) do not hold, error when the
// policy fails on it or a namespaced policy's target lies outside its
// namespace. The trigger itself is never changed here.
func (mp *Policy) mutateExisting(ctx context.Context, in *review.View, cfg *review.Options, own celruntime.Owner) []review.RuleResponse {
	ex := mp.existing
	v := mp.variants[0]
	if in.Req.Object == nil {
		return nil
	}
	match := ex.trigger
	if cfg.BackgroundChecks {
		match = v.match
	}
	if !match.Matches(in) {
		return nil
	}
	base := review.RuleResponse{Name: ex.rule, Type: review.TypeMutation}
	answer := func(o review.Outcome) []review.RuleResponse {
		rr := base
		rr.Status, rr.Message = o.Status, o.Message
		return []review.RuleResponse{rr}
	}
	e := mp.evaluator(ctx, in, cfg, v)
	for i := range v.conditions {
		val, err := e.Eval(&v.conditions[i])
		switch {
		case err != nil:
			return answer(review.Errorf("failed to evaluate policy: %v", err))
		case val != types.True:
			if cfg.BackgroundChecks {
				return nil
			}
			return answer(review.Skip("skip"))
		}
	}
	if cfg.BackgroundChecks {
		return answer(review.Pass("success"))
	}
	targets, err := mp.listTargets(ctx, e, v, ex, cfg)
	if err != nil {
		return answer(review.Errorf("failed to select targets: %v", err))
	}
	var out []review.RuleResponse
	for _, t := range targets {
		rr := base
		ref := review.RefOf(t.object)
		rr.Target = &ref
		if mp.namespace != "" && ref.Namespace != mp.namespace {
			rr.Status, rr.Message = review.StatusError, celruntime.OutOfScope("mutate", mp.namespace, ref.Namespace).Error()
			out = append(out, rr)
			continue
		}
		treq := &review.Request{
			Operation: kyvernov1.Update, Object: t.object, OldObject: t.object, Resource: t.resource,
			UserInfo: in.Req.UserInfo, Roles: in.Req.Roles, ClusterRoles: in.Req.ClusterRoles,
		}
		tv := review.NewView(ctx, treq, cfg)
		if ex.targets != nil && !ex.targets.Matches(tv) {
			// A target rule may select a subresource of the target's
			// resource (pods/resize): the target is then evaluated as an
			// UPDATE of that subresource, and written through it.
			tv = nil
			for _, sub := range ex.subresourcesOf(t.resource.Resource) {
				sreq := *treq
				sreq.SubResource = sub
				if sv := review.NewView(ctx, &sreq, cfg); ex.targets.Matches(sv) {
					tv, rr.TargetSubresource = sv, sub
					break
				}
			}
			if tv == nil {
				continue
			}
		}
		// `object` is the target; `request` stays the trigger's, as in
		// Kyverno: a policy triggered by a DELETE reads the deleted
		// object as request.oldObject while it patches a target.
		celruntime.InputsOf(tv).Request = celruntime.InputsOf(in).RequestValue()
		o, patched := mp.evaluateVariant(ctx, tv, cfg, own, v, v.targetConditions, &rr)
		rr.Status, rr.Message = o.Status, o.Message
		if len(o.Props) > 0 {
			rr.Properties = o.Props
		}
		if o.Status == review.StatusPass && patched != nil && !reflect.DeepEqual(patched, t.object) {
			if err := review.CheckRetarget(ex.rule, ref, patched); err != nil {
				rr.Status, rr.Message = review.StatusError, err.Error()
			} else {
				rr.PatchedTarget = patched
			}
		}
		out = append(out, rr)
	}
	return out
}

// subresourcesOf returns the subresources of resource (or of every
// resource: "*/resize") that the target rules name, in their order.
func (ex *mpolExisting) subresourcesOf(resource string) []string {
	if ex.targets == nil {
		return nil
	}
	var out []string
	for _, r := range ex.targets.Src.ResourceRules {
		for _, res := range r.Resources {
			base, sub, ok := strings.Cut(res, "/")
			if ok && (base == resource || base == "*") && sub != "" && sub != "*" && !slices.Contains(out, sub) {
				out = append(out, sub)
			}
		}
	}
	return out
}

// mpolTarget is an existing object to mutate and its resource.
type mpolTarget struct {
	object   map[string]any
	resource schema.GroupVersionResource
}

// listTargets lists the targets: the objects the target expression names
// (evaluated with object = the trigger), each read again so that its
// resourceVersion is current, or every object of the target resources (in
// a namespaced policy's namespace only).
func (mp *Policy) listTargets(ctx context.Context, e *celruntime.Evaluator, v *variant, ex *mpolExisting, cfg *review.Options) ([]mpolTarget, error) {
	l := cfg.Loaders.Resources
	if l == nil {
		return nil, fmt.Errorf("no loader for existing resources")
	}
	if v.targetExpr == nil {
		var out []mpolTarget
		for _, gvr := range ex.resources {
			objs, err := l.Resources(ctx, gvr.GroupVersion().String(), gvr.Resource, mp.namespace)
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", gvr.String(), err)
			}
			for _, o := range objs {
				out = append(out, mpolTarget{object: o, resource: gvr})
			}
		}
		return out, nil
	}
	val, err := e.Eval(v.targetExpr)
	if err != nil {
		return nil, fmt.Errorf("targetMatchConstraints.expression: %w", err)
	}
	refs, err := targetRefs(val)
	if err != nil {
		return nil, fmt.Errorf("targetMatchConstraints.expression: %w", err)
	}
	var out []mpolTarget
	for _, r := range refs {
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err != nil || r.Kind == "" || r.Name == "" {
			return nil, fmt.Errorf("targetMatchConstraints.expression: an object needs apiVersion, kind and metadata.name, got %q %q %q", r.APIVersion, r.Kind, r.Name)
		}
		if mp.namespace != "" && r.Namespace != mp.namespace {
			// Refused per target by the caller; never read.
			out = append(out, mpolTarget{object: map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind,
				"metadata": map[string]any{"name": r.Name, "namespace": r.Namespace}}})
			continue
		}
		gvr := gv.WithResource(match.ResourceForKind(r.Kind))
		obj, err := l.Resource(ctx, r.APIVersion, gvr.Resource, r.Namespace, r.Name)
		if err != nil {
			return nil, fmt.Errorf("reading %s %s: %w", r.Kind, objectName(r.Namespace, r.Name), err)
		}
		if obj != nil {
			out = append(out, mpolTarget{object: obj, resource: gvr})
		}
	}
	return out, nil
}

// targetRefs names the objects a target expression returned: one object,
// or a list of them under items.
func targetRefs(val ref.Val) ([]review.ResourceRef, error) {
	native, err := val.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return nil, fmt.Errorf("want map(string, any), got %s", val.Type().TypeName())
	}
	m, ok := native.(*structpb.Value).AsInterface().(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want map(string, any), got %s", val.Type().TypeName())
	}
	items, hasItems := m["items"]
	if !hasItems {
		return []review.ResourceRef{review.RefOf(m)}, nil
	}
	list, ok := items.([]any)
	if !ok {
		return nil, fmt.Errorf("items: want a list of objects")
	}
	out := make([]review.ResourceRef, 0, len(list))
	for i, it := range list {
		obj, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("items[%d]: want an object", i)
		}
		out = append(out, review.RefOf(obj))
	}
	return out, nil
}

func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
