package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/schedule"
)

// deletingPolicy is a compiled DeletingPolicy or NamespacedDeletingPolicy
// (cel-policy-types.md §3.3.4): the resources its matchConstraints name
// (operations ignored), whose conditions, over object, namespaceObject and
// variables, all hold.
type deletingPolicy struct {
	match      *celruntime.Constraints
	compiler   *celruntime.Compiler
	conditions []celruntime.Program
	resources  []schema.GroupVersionResource
}

// compileDeletingPolicy compiles a DeletingPolicy into a CleanupPolicy the
// cleanup controller schedules like a CleanupPolicy.
func compileDeletingPolicy(src policiesv1.DeletingPolicyLike) (*CleanupPolicy, error) {
	spec := src.GetDeletingPolicySpec()
	p := &CleanupPolicy{source: src, key: cleanupPolicyKey(src)}
	f := &fault.Collector{Kind: src.GetKind(), Name: p.key}
	s, err := schedule.Parse(spec.Schedule)
	if err != nil {
		f.Add("spec.schedule", fmt.Sprintf("invalid schedule %q: %v", spec.Schedule, err))
	}
	p.schedule = s
	p.dryRun = checkDryRun(src.GetAnnotations(), f)
	p.dpol = compileDeletingSpec(spec, f)
	if len(f.Errs) > 0 {
		return nil, f.Errs
	}
	return p, nil
}

// compileDeletingSpec compiles what selects a DeletingPolicy's objects:
// its matchConstraints, the resources they name, its variables and
// conditions. Faults go to f.
func compileDeletingSpec(spec *policiesv1.DeletingPolicySpec, f *fault.Collector) *deletingPolicy {
	dp := &deletingPolicy{}
	if spec.MatchConstraints == nil || len(spec.MatchConstraints.ResourceRules) == 0 {
		f.Add("spec.matchConstraints", "a matchConstraints with at least one resource rule is required")
	} else {
		mc := spec.MatchConstraints.DeepCopy()
		for i := range mc.ResourceRules {
			// There is no request: operations select nothing.
			mc.ResourceRules[i].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
			r := &mc.ResourceRules[i]
			for j, res := range r.Resources {
				field := fmt.Sprintf("spec.matchConstraints.resourceRules[%d].resources[%d]", i, j)
				if res == "*" || strings.Contains(res, "/") {
					f.Add(field, fmt.Sprintf("%q: a DeletingPolicy must name the resources it deletes, without wildcards or subresources", res))
					continue
				}
				for _, g := range r.APIGroups {
					for _, v := range r.APIVersions {
						dp.resources = append(dp.resources, schema.GroupVersionResource{Group: g, Version: v, Resource: res})
					}
				}
			}
		}
		var err error
		if dp.match, err = celruntime.CompileConstraints(mc); err != nil {
			f.Add("spec.matchConstraints", err.Error())
		}
	}
	envCompiler, err := celruntime.PolicyCompiler()
	if err == nil {
		dp.compiler = envCompiler.ForPolicy()
	}
	if err != nil {
		f.Add("spec", "CEL environment: "+err.Error())
		return nil
	}
	fields := celruntime.Fields{Compiler: dp.compiler, Faults: f}
	fields.Variables(spec.Variables, "spec.variables")
	dp.conditions = fields.Conditions(spec.Conditions, "spec.conditions")
	return dp
}

// checkDryRun reads the charter.dev/dry-run annotation.
func checkDryRun(annotations map[string]string, f *fault.Collector) bool {
	switch v := annotations[dryRunAnnotation]; v {
	case "", "false":
		return false
	case "true":
		return true
	default:
		// A typo must not turn a rehearsal into deletions.
		f.Add("metadata.annotations["+dryRunAnnotation+"]", fmt.Sprintf("%q is neither \"true\" nor \"false\"", v))
		return false
	}
}

// Resources are the resources a DeletingPolicy lists (group and version
// may be "*"); nil for a CleanupPolicy, which names kinds (Kinds).
func (p *CleanupPolicy) Resources() []schema.GroupVersionResource {
	if p.dpol == nil {
		return nil
	}
	return p.dpol.resources
}

// selectsCEL decides on an object for a DeletingPolicy: matchConstraints
// (namespaceSelector, objectSelector, resource rules), then the variables
// and conditions; all true deletes it.
func (r *CleanupRun) selectsCEL(o CleanupObject, namespace string) (bool, error) {
	req := &review.Request{Operation: kyvernov1.Create, Object: o.Object, Kind: o.Kind, Resource: o.Resource}
	if namespace != "" && o.NamespaceLabels != nil {
		req.NamespaceLabels = o.NamespaceLabels()
		if req.NamespaceLabels == nil {
			req.NamespaceLabels = map[string]string{}
		}
	}
	own := celruntime.Owner{Source: r.policy.source, Exceptions: r.exceptions}
	return r.policy.dpol.selects(review.NewView(r.ctx, req, r.ev.cfg), r.ev.namespace, namespace, r.policy.key, own)
}

// selects decides on the object of in: libNamespace is the namespace the
// policy's libraries read in ("" for a cluster-wide policy), scope the
// one its exceptions act in; key names the policy in errors.
func (dp *deletingPolicy) selects(in *review.View, libNamespace, scope, key string, own celruntime.Owner) (bool, error) {
	if !dp.match.Matches(in) {
		return false, nil
	}
	ci := celruntime.InputsOf(in)
	// A DeletingPolicy has no request: oldObject and request are null.
	act := &celruntime.PolicyActivation{
		Activation: celruntime.Activation{In: ci, Object: ci.Object, OldObject: types.NullValue, Request: types.NullValue, Params: types.NullValue},
		Libs:       celruntime.NewLibReceivers(in.Ctx, &in.Opts.Loaders, libNamespace),
	}
	cctx := dp.compiler.CreateContext(in.Ctx)
	act.Variables = cctx.Variables(act)
	e := &celruntime.Evaluator{Ctx: cctx, Act: act, Budget: celconfig.RuntimeCELCostBudget}
	// A PolicyException that names the policy and whose conditions hold
	// keeps the object.
	_, exempt, err := own.EvalExceptions(e, scope, false)
	if err != nil {
		return false, fmt.Errorf("exceptions of %s %s: %v", own.Source.GetKind(), key, err)
	}
	if exempt != nil {
		return false, nil
	}
	for i := range dp.conditions {
		val, err := e.Eval(&dp.conditions[i])
		if err != nil {
			return false, fmt.Errorf("conditions of %s %s: %v", own.Source.GetKind(), key, err)
		}
		if val != types.True {
			return false, nil
		}
	}
	return true, nil
}

// prepareDeleting starts a run of a DeletingPolicy: it has no context
// entries to load.
func (p *CleanupPolicy) prepareDeleting(ctx context.Context, cfg *review.Options) *CleanupRun {
	ev := &evaluation{set: &PolicySet{}, cfg: cfg}
	if p.source.IsNamespaced() {
		ev.namespace = p.source.GetNamespace()
	}
	return &CleanupRun{policy: p, ctx: ctx, ev: ev}
}

// WithExceptions makes the policies.kyverno.io PolicyExceptions part of a
// DeletingPolicy's run: an object that an exception naming the policy
// exempts (its matchConditions hold; in the exception's namespace unless
// scope is ExceptionAnyNamespace) is kept. Exceptions that do not compile
// are left out and returned as the error; the run still honours the
// others.
func (r *CleanupRun) WithExceptions(exceptions []*policiesv1.PolicyException, scope celruntime.ExceptionScope) error {
	if r.policy.dpol == nil {
		return nil
	}
	var errs fault.List
	for _, src := range exceptions {
		ex, faults := celruntime.CompileException(src, scope)
		if len(faults) > 0 {
			errs = append(errs, faults...)
			continue
		}
		r.exceptions = append(r.exceptions, ex)
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}
