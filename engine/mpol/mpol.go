// Package mpol is the MutatingPolicy kind (cel-policy-types.md §3.3.2): a
// compiled MutatingPolicy or NamespacedMutatingPolicy (Compile), its
// mutations of a request's object at admission and of existing targets
// (Policy.Mutate), and its answer in a background scan (Policy.Scan). The
// engine's root compiles it into a PolicySet, files its responses and
// hands the patched object to the next policy.
package mpol

import (
	"context"
	"fmt"
	"reflect"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	mappatch "k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/autogen"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/review"
)

// Policy is a compiled MutatingPolicy or NamespacedMutatingPolicy
// (cel-policy-types.md §3.3.2): one result per matching request, with rule
// "", from its matchConstraints, variables, matchConditions and mutations,
// evaluated through the MutatingAdmissionPolicy CEL compiler extended with
// Kyverno's libraries, and applied by Kubernetes' own MAP patchers.
type Policy struct {
	// namespace is set for a NamespacedMutatingPolicy: it mutates objects
	// of its namespace only, and its libraries read there.
	namespace string
	// variants are the policy itself, then its autogen copies for Pod
	// controllers; their match constraints do not overlap.
	variants []*variant
	// reinvoke is reinvocationPolicy IfNeeded.
	reinvoke bool
	// admission is evaluation.admission.enabled: without it the policy
	// patches nothing at admission (it is there for its triggers).
	admission bool
	// existing is set with evaluation.mutateExisting (existing.go).
	existing *mpolExisting
}

type variant struct {
	match *celruntime.Constraints
	// lazy is set on an autogen copy until compiled (compiled()).
	lazy        *celruntime.LazyVariant[policiesv1.MutatingPolicySpec, variant]
	compiler    *celruntime.Compiler
	conditions  []celruntime.Program
	mutations   []mutation
	annotations []celruntime.Annotation
	// targetExpr and targetConditions select and admit mutate-existing
	// targets (targetMatchConstraints.expression, targetMatchConditions,
	// else matchConditions).
	targetExpr       *celruntime.Program
	targetConditions []celruntime.Program
}

type mutation struct {
	applyConfiguration bool
	celruntime.Program
}

// Reinvoked reports whether the policy asks to be run again when a later
// policy changed the object (reinvocationPolicy IfNeeded).
func (mp *Policy) Reinvoked() bool { return mp.reinvoke }

// Compile compiles a MutatingPolicy or
// NamespacedMutatingPolicy known by key; cache, when not nil, holds
// variants compiled before.
func Compile(src policiesv1.MutatingPolicyLike, key string, cache *celruntime.Cache) (*Policy, fault.List) {
	spec := src.GetMutatingPolicySpec()
	f := &fault.Collector{Kind: src.GetKind(), Name: key}
	mp := &Policy{namespace: policyid.Namespace(src), reinvoke: spec.GetReinvocationPolicy() == admissionregistrationv1.IfNeededReinvocationPolicy, admission: spec.AdmissionEnabled()}
	if e := spec.EvaluationConfiguration; e != nil && e.Mode != "" && e.Mode != policiesv1.EvaluationModeKubernetes {
		f.Add("spec.evaluation.mode", fmt.Sprintf("evaluation mode %q is not supported by charter (only Kubernetes)", e.Mode))
	}
	if !spec.AdmissionEnabled() && !spec.MutateExistingEnabled() {
		f.Add("spec.evaluation", "disabling both admission and mutateExisting evaluation modes is not allowed")
	}
	if len(spec.Mutations) == 0 {
		f.Add("spec.mutations", "a MutatingPolicy needs at least one mutation")
	}
	compile := func(spec *policiesv1.MutatingPolicySpec, path string, f *fault.Collector) *variant {
		return compileVariant(cache, spec, path, f)
	}
	if v := compile(spec, "spec", f); v != nil {
		mp.variants = append(mp.variants, v)
	}
	if spec.MutateExistingEnabled() {
		mp.existing = compileExisting(spec, src.GetName(), src.IsNamespaced(), f)
	}
	if len(f.Errs) > 0 {
		return nil, f.Errs
	}
	mp.variants = celruntime.AppendAutogenVariants(mp.variants, autogen.MutatingPolicy(spec), compile,
		func(m *celruntime.Constraints, l *celruntime.LazyVariant[policiesv1.MutatingPolicySpec, variant]) *variant {
			return &variant{match: m, lazy: l}
		}, f)
	if len(f.Errs) > 0 {
		return nil, f.Errs
	}
	return mp, nil
}

// compileVariant compiles a variant, or returns the one compiled
// before in cache from the same spec.
func compileVariant(cache *celruntime.Cache, spec *policiesv1.MutatingPolicySpec, path string, f *fault.Collector) *variant {
	return celruntime.Cached(cache, spec, path, f, func() *variant { return compileVariantUncached(spec, path, f) })
}

func compileVariantUncached(spec *policiesv1.MutatingPolicySpec, path string, f *fault.Collector) *variant {
	compiler, match, ok := celruntime.StartVariant(celruntime.PolicyCompiler, spec.MatchConstraints, path, f)
	if !ok {
		return nil
	}
	v := &variant{compiler: compiler, match: match}
	decls := plugincel.OptionalVariableDeclarations{}
	fields := celruntime.Fields{Compiler: v.compiler, Decls: decls, Faults: f}
	// Variables compile first: a MutatingPolicy's matchConditions may use
	// them, as in Kyverno.
	fields.Variables(spec.Variables, path+".variables")
	v.conditions = fields.Conditions(spec.MatchConditions, path+".matchConditions")
	patchDecls := decls
	patchDecls.HasPatchTypes = true
	for i, m := range spec.Mutations {
		field := fmt.Sprintf("%s.mutations[%d]", path, i)
		var a plugincel.ExpressionAccessor
		switch m.PatchType {
		case admissionregistrationv1.PatchTypeApplyConfiguration:
			if m.ApplyConfiguration == nil {
				f.Add(field+".applyConfiguration", "patchType ApplyConfiguration needs applyConfiguration")
				continue
			}
			a, field = &mappatch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}, field+".applyConfiguration.expression"
		case admissionregistrationv1.PatchTypeJSONPatch:
			if m.JSONPatch == nil {
				f.Add(field+".jsonPatch", "patchType JSONPatch needs jsonPatch")
				continue
			}
			a, field = &mappatch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, field+".jsonPatch.expression"
		default:
			f.Add(field+".patchType", fmt.Sprintf("unknown patchType %q, want ApplyConfiguration or JSONPatch", m.PatchType))
			continue
		}
		if p := fields.ProgramWith(a, field, patchDecls); p != nil {
			v.mutations = append(v.mutations, mutation{
				applyConfiguration: m.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration,
				Program:            celruntime.Program{Expr: a.GetExpression(), Prog: p},
			})
		}
	}
	if spec.MutateExistingEnabled() {
		compileTargetSelection(v, spec, path, fields)
	}
	for i, a := range spec.AuditAnnotations {
		field := fmt.Sprintf("%s.auditAnnotations[%d]", path, i)
		if a.Key == "" {
			f.Add(field+".key", "an audit annotation needs a key")
		}
		if p := fields.Program(&celruntime.Accessor{Expr: a.ValueExpression, Returns: []*celgo.Type{celgo.StringType, celgo.NullType}}, field+".valueExpression"); p != nil {
			v.annotations = append(v.annotations, celruntime.Annotation{Key: a.Key, Program: celruntime.Program{Expr: a.ValueExpression, Prog: p}})
		}
	}
	return v
}

// Mutate evaluates a MutatingPolicy on the request's object: the first
// variant whose matchConstraints select the request, then exceptions,
// matchConditions (which see the variables) and the mutations in order,
// each on the previous one's result. It returns the policy's rule
// responses and the patched object, nil when the policy did not patch it
// (the root's response and view for the next policy carry it). own is
// what the policy's owner hands over (its exceptions).
//
// With cfg.MutateExisting, a mutate-existing policy answers for its
// targets instead (mutateExisting), after its admission response when it
// also mutates at admission and the run is not admission's background
// check (the CLI shows both).
func (mp *Policy) Mutate(ctx context.Context, in *review.View, cfg *review.Options, own celruntime.Owner) ([]review.RuleResponse, map[string]any) {
	if !cfg.MutateExisting || mp.existing == nil {
		return mp.mutateAdmission(ctx, in, cfg, own)
	}
	existing := mp.mutateExisting(ctx, in, cfg, own)
	if cfg.BackgroundChecks {
		return existing, nil
	}
	rules, patched := mp.mutateAdmission(ctx, in, cfg, own)
	return append(rules, existing...), patched
}

// mutateAdmission evaluates a MutatingPolicy on the request's object as
// admission does; see Mutate.
func (mp *Policy) mutateAdmission(ctx context.Context, in *review.View, cfg *review.Options, own celruntime.Owner) ([]review.RuleResponse, map[string]any) {
	if !mp.admission || in.Req.Object == nil || in.Op == kyvernov1.Delete {
		return nil, nil
	}
	var v *variant
	for _, cand := range mp.variants {
		if cand.match.Matches(in) {
			v = cand
			break
		}
	}
	if v == nil {
		return nil, nil
	}
	if v.lazy != nil {
		var fault string
		if v, fault = v.lazy.Compiled(); v == nil {
			return []review.RuleResponse{{Name: celruntime.RuleEvaluation, Type: review.TypeMutation, Status: review.StatusError, Message: fault}}, nil
		}
	}
	return mp.respond(ctx, in, cfg, own, v, v.conditions)
}

// respond evaluates the variant after conditions into the policy's one
// rule response, and the patched object when it passed (nil otherwise).
func (mp *Policy) respond(ctx context.Context, in *review.View, cfg *review.Options, own celruntime.Owner, v *variant, conditions []celruntime.Program) ([]review.RuleResponse, map[string]any) {
	rr := review.RuleResponse{Name: "", Type: review.TypeMutation}
	o, patched := mp.evaluateVariant(ctx, in, cfg, own, v, conditions, &rr)
	rr.Status, rr.Message = o.Status, o.Message
	if len(o.Props) > 0 {
		rr.Properties = o.Props
	}
	if o.Status != review.StatusPass {
		patched = nil
	}
	return []review.RuleResponse{rr}, patched
}

// Scan answers for a MutatingPolicy in a background scan
// (cfg.MutationScan): its admission mutations run on the existing object,
// and a pass that changed the object becomes a failure, since the object
// in the cluster does not carry the mutation. Only the outcome is kept,
// as a validation result: the scan patches nothing.
//
// A mutate-existing policy's target that its admission rules do not
// select is checked with the target conditions (scanTarget), as Kyverno's
// scan reports a mutate-existing target (its chainsaw test
// mutating-policies/reporting/existing-admission-flow).
func (mp *Policy) Scan(ctx context.Context, in *review.View, cfg *review.Options, own celruntime.Owner) []review.RuleResponse {
	rules, patched := mp.mutateAdmission(ctx, in, cfg, own)
	if len(rules) == 0 {
		rules, patched = mp.scanTarget(ctx, in, cfg, own)
	}
	if patched == nil {
		patched = in.Req.Object
	}
	for i := range rules {
		rr := &rules[i]
		// A check, not a mutation: reports keep it as a validation's
		// result (admission's mutation responses they leave out).
		rr.Type = review.TypeValidation
		if rr.Status == review.StatusPass && rr.Name != celruntime.RuleException && !reflect.DeepEqual(patched, in.Req.Object) {
			rr.Status, rr.Message = review.StatusFail, "mutation is not applied"
		}
	}
	return rules
}

// scanTarget is Scan's answer for an existing object that a
// mutate-existing policy's target rules (targetMatchConstraints' resource
// rules and selectors) select: the mutations run on it after the target
// conditions, with the object as both object and target. No response for
// any other object, or for a policy whose targets are only what its
// target expression names. The patched object, nil when not patched.
func (mp *Policy) scanTarget(ctx context.Context, in *review.View, cfg *review.Options, own celruntime.Owner) ([]review.RuleResponse, map[string]any) {
	ex := mp.existing
	if ex == nil || ex.targets == nil || in.Req.Object == nil || len(mp.variants) == 0 || !ex.targets.Matches(in) {
		return nil, nil
	}
	v := mp.variants[0]
	return mp.respond(ctx, in, cfg, own, v, v.targetConditions)
}

// evaluator returns an evaluator of the variant's expressions on the
// request, its variables bound lazily.
func (mp *Policy) evaluator(ctx context.Context, in *review.View, cfg *review.Options, v *variant) *celruntime.Evaluator {
	ci := celruntime.InputsOf(in)
	act := &celruntime.PolicyActivation{
		Activation: celruntime.Activation{In: ci, Object: ci.Object, OldObject: ci.OldObject, Request: ci.Request, Params: types.NullValue},
		Libs:       celruntime.NewLibReceivers(ctx, &cfg.Loaders, mp.namespace),
		Exceptions: types.DefaultTypeAdapter.NativeToValue([]any{}),
	}
	cctx := v.compiler.CreateContext(ctx)
	act.Variables = cctx.Variables(act)
	return &celruntime.Evaluator{Ctx: cctx, Act: act, Budget: celconfig.RuntimeCELCostBudget}
}

// evaluateVariant runs exceptions, conditions (matchConditions at
// admission, the target conditions for a mutate-existing target) and the
// mutations on the request's object.
func (mp *Policy) evaluateVariant(ctx context.Context, in *review.View, cfg *review.Options, own celruntime.Owner, v *variant, conditions []celruntime.Program, rr *review.RuleResponse) (review.Outcome, map[string]any) {
	e := mp.evaluator(ctx, in, cfg, v)
	act := e.Act.(*celruntime.PolicyActivation)

	allowed, exempt, err := own.EvalExceptions(e, in.Scope, false)
	if err != nil {
		rr.Name = celruntime.RuleException
		return review.Errorf("failed to evaluate exception: %v", err), nil
	}
	if exempt != nil {
		rr.Name = celruntime.RuleException
		return exempt.Outcome(), nil
	}
	act.Exceptions = allowed

	for i := range conditions {
		val, err := e.Eval(&conditions[i])
		switch {
		case err != nil:
			return review.Errorf("failed to evaluate policy: %v", err), nil
		case val != types.True:
			return review.Skip("skip"), nil
		}
	}
	obj := in.Req.Object
	for i := range v.mutations {
		m := &v.mutations[i]
		if i > 0 {
			// Each mutation sees the previous one's result, variables
			// included.
			act.Object = types.DefaultTypeAdapter.NativeToValue(obj)
			e.Ctx = v.compiler.CreateContext(ctx)
			act.Variables = e.Ctx.Variables(act)
		}
		val, err := e.Eval(&m.Program)
		if err != nil {
			return review.Errorf("failed to evaluate policy: %v", err), nil
		}
		out, err := applyMutation(ctx, in, m, val, obj)
		if err != nil {
			return review.Errorf("failed to evaluate policy: %v", err), nil
		}
		obj = out
	}
	result := review.Pass("success")
	if len(v.annotations) > 0 {
		act.Object = types.DefaultTypeAdapter.NativeToValue(obj)
		for i := range v.annotations {
			a := &v.annotations[i]
			val, err := e.Eval(&a.Program)
			if err != nil {
				return review.Errorf("failed to evaluate policy: audit annotation %s: %v", a.Key, err), nil
			}
			if s, ok := val.(types.String); ok && s != "" {
				if result.Props == nil {
					result.Props = map[string]string{}
				}
				result.Props[a.Key] = string(s)
			}
		}
	}
	return result, obj
}

// evaluated is a MutatingEvaluator whose result is already known: the
// engine evaluates a mutation's expression with its own activation
// (Kyverno's libraries, exceptions) and hands the value to Kubernetes'
// MutatingAdmissionPolicy patchers, which apply it as the API server would.
type evaluated struct{ val ref.Val }

func (e evaluated) ForInput(_ context.Context, _ *admission.VersionedAttributes, _ *admissionv1.AdmissionRequest, _ plugincel.OptionalVariableBindings, _ *corev1.Namespace, budget int64) (plugincel.EvaluationResult, int64, error) {
	return plugincel.EvaluationResult{EvalResult: e.val}, budget, nil
}

func (evaluated) CompilationErrors() []error { return nil }

// applyMutation applies one mutation's value to obj through the MAP
// patchers: an ApplyConfiguration is merged with structured-merge-diff
// over the kind's schema (atomic fields refused), a JSONPatch is applied
// as RFC 6902 (a failed test op leaves the object unchanged).
func applyMutation(ctx context.Context, in *review.View, m *mutation, val ref.Val, obj map[string]any) (map[string]any, error) {
	var patcher mappatch.Patcher
	if m.applyConfiguration {
		patcher = mappatch.NewApplyConfigurationPatcher(evaluated{val})
	} else {
		patcher = mappatch.NewJSONPatcher(evaluated{val})
	}
	current := &unstructured.Unstructured{Object: obj}
	gvk := current.GroupVersionKind()
	var old runtime.Object
	if in.Req.OldObject != nil {
		old = &unstructured.Unstructured{Object: in.Req.OldObject}
	}
	attrs := admission.NewAttributesRecord(current, old, gvk, in.Res.Namespace, in.Res.Name, in.Resource(), in.Req.SubResource,
		admission.Operation(in.Op), nil, in.Req.DryRun, &user.DefaultInfo{Name: in.Req.UserInfo.Username, UID: in.Req.UserInfo.UID, Groups: in.Req.UserInfo.Groups})
	out, err := patcher.Patch(ctx, mappatch.Request{
		MatchedResource:     in.Resource(),
		VersionedAttributes: &admission.VersionedAttributes{Attributes: attrs, VersionedObject: admission.NewLazyObject(current), VersionedOldObject: admission.NewLazyObject(old), VersionedKind: gvk},
		ObjectInterfaces:    mutationObjectInterfaces,
		TypeConverter:       mutationTypeConverter(),
	}, celconfig.RuntimeCELCostBudget)
	if err != nil {
		return nil, err
	}
	u, ok := out.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("patch returned %T, want an unstructured object", out)
	}
	return u.Object, nil
}

var mutationObjectInterfaces = admission.NewObjectInterfacesFromScheme(runtime.NewScheme())
