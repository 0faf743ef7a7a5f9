// Package vpol is the ValidatingPolicy kind (cel-policy-types.md §3.3.1):
// a compiled ValidatingPolicy or NamespacedValidatingPolicy (Compile) and
// its evaluation on a request (Policy.Validate). The engine's root
// compiles it into a PolicySet and files its one response per request.
package vpol

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/charter-dev/charter/api/charter"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/autogen"
	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/review"
)

// Policy is a compiled ValidatingPolicy or
// NamespacedValidatingPolicy (cel-policy-types.md §3.3.1): one result per
// matching request, with rule "", from its matchConstraints,
// matchConditions, variables, validations and auditAnnotations, evaluated
// through the VAP CEL compiler extended with Kyverno's libraries.
type Policy struct {
	// namespace is set for a NamespacedValidatingPolicy, which acts only on
	// requests in its namespace.
	namespace string
	kind      string
	// variants are the policy itself, then its autogen copies for Pod
	// controllers; their match constraints do not overlap.
	variants []*variant
	// ignore is failurePolicy Ignore: a matchCondition error skips.
	ignore bool
	action review.Action
}

// variant is the policy or one of its autogen copies, compiled.
type variant struct {
	match *celruntime.Constraints
	// lazy is set on an autogen copy until compiled (Compiled()).
	lazy        *celruntime.LazyVariant[policiesv1.ValidatingPolicySpec, variant]
	compiler    *celruntime.Compiler
	conditions  []celruntime.Program
	variables   []celruntime.Variable
	validations []celruntime.Expression
	annotations []celruntime.Annotation
	// untrackedWithin is the input bound within which every program of
	// the variant runs without cost tracking (engine/celenv's celcost.go);
	// zero: never.
	untrackedWithin celenv.InputBound
	// reads are the inputs its programs read (a set of 1<<input), which
	// must be within untrackedWithin.
	reads uint8
}

// Compile compiles a ValidatingPolicy or NamespacedValidatingPolicy
// known by key; cache, when not nil, holds variants compiled before.
func Compile(src policiesv1.ValidatingPolicyLike, key string, cache *celruntime.Cache) (*Policy, fault.List) {
	spec := src.GetValidatingPolicySpec()
	f := &fault.Collector{Kind: src.GetKind(), Name: key}
	vp := &Policy{kind: src.GetKind(), ignore: spec.GetFailurePolicy() == admissionregistrationv1.Ignore,
		action: celruntime.ValidationAction(spec.ValidationAction, spec.EvaluationConfiguration, f)}
	if src.IsNamespaced() {
		vp.namespace = src.GetNamespace()
	}
	if len(spec.Validations) == 0 && len(spec.AuditAnnotations) == 0 {
		f.Add("spec.validations", "a ValidatingPolicy needs at least one validation or audit annotation")
	}
	compile := func(spec *policiesv1.ValidatingPolicySpec, path string, f *fault.Collector) *variant {
		return compileVariant(cache, spec, path, f)
	}
	vp.variants = celruntime.CompileVariants(spec, autogen.ValidatingPolicy, compile,
		func(m *celruntime.Constraints, l *celruntime.LazyVariant[policiesv1.ValidatingPolicySpec, variant]) *variant {
			return &variant{match: m, lazy: l}
		}, f)
	if len(f.Errs) > 0 {
		return nil, f.Errs
	}
	return vp, nil
}

// compileVariant compiles a variant, or returns the one compiled before
// in cache from the same spec.
func compileVariant(cache *celruntime.Cache, spec *policiesv1.ValidatingPolicySpec, path string, f *fault.Collector) *variant {
	return celruntime.Cached(cache, spec, path, f, func() *variant { return compileVariantUncached(spec, path, f) })
}

func compileVariantUncached(spec *policiesv1.ValidatingPolicySpec, path string, f *fault.Collector) *variant {
	compiler, match, ok := celruntime.StartVariant(celruntime.PolicyCompiler, spec.MatchConstraints, path, f)
	if !ok {
		return nil
	}
	v := &variant{compiler: compiler, match: match}
	// params and authorizer are never bound for these kinds: every
	// expression compiles through compileChecked, whose checked
	// expressions give the variant's cost estimates (boundVariant).
	var checked []checkedPart
	compile := func(a *celruntime.Accessor, field string) *celruntime.Program {
		if strings.TrimSpace(a.Expr) == "" {
			f.Add(field, "expression must not be empty")
			return nil
		}
		res := v.compiler.CompileChecked(a, environment.StoredExpressions)
		if res.Error != nil {
			f.Add(field, celruntime.Fault(res.Error.Detail))
			return nil
		}
		p := &celruntime.Program{Expr: a.Expr, Prog: res.Program, Untracked: res.Untracked}
		checked = append(checked, checkedPart{res: res, program: p})
		return p
	}
	// matchConditions compile before the variables are stored, so they
	// cannot use them, as in Kyverno.
	for i, mc := range spec.MatchConditions {
		field := fmt.Sprintf("%s.matchConditions[%d].expression", path, i)
		if p := compile(&celruntime.Accessor{Name: mc.Name, Expr: mc.Expression, Returns: celruntime.BoolReturn()}, field); p != nil {
			v.conditions = append(v.conditions, *p)
		}
	}
	for i, vr := range spec.Variables {
		field := fmt.Sprintf("%s.variables[%d]", path, i)
		if vr.Name == "" {
			f.Add(field+".name", "a variable needs a name")
			continue
		}
		res := v.compiler.CompileAndStoreChecked(&celruntime.Accessor{Name: vr.Name, Expr: vr.Expression, Returns: celruntime.AnyReturn()}, environment.StoredExpressions)
		if res.Error != nil {
			f.Add(field+".expression", celruntime.Fault(res.Error.Detail))
			continue
		}
		v.variables = append(v.variables, celruntime.Variable{Name: vr.Name, Prog: res.Program, Untracked: res.Untracked, Shared: celruntime.SharedKeyOf(vr.Expression)})
		checked = append(checked, checkedPart{res: res, variable: vr.Name})
	}
	v.validations = celruntime.Validations(spec.Validations, path, compile)
	v.annotations = celruntime.AuditAnnotations(spec.AuditAnnotations, path, f, compile)
	if len(f.Errs) == 0 {
		v.boundVariant(checked)
	}
	return v
}

// checkedPart is a compiled expression of a variant and the program or
// variable it became.
type checkedPart struct {
	res      celruntime.CheckedExpression
	program  *celruntime.Program // nil for a variable
	variable string
}

// boundVariant finds the largest input bound at which every program of
// the variant stays within the per-call limit and all of them within the
// budget (engine/celenv's celcost.go), and sets untrackedWithin to it;
// with none, or when a program has no untracked plan, the variant is
// always tracked. A variable's worst case at that bound is what sharing
// its value charges a tracked policy (celruntime.Variables).
func (v *variant) boundVariant(checked []checkedPart) {
	bounds := make([]celenv.SizeBounds, len(checked))
	vars := map[string]celenv.ValueBounds{}
	for i, c := range checked {
		if c.res.Untracked == nil || c.res.Env == nil {
			return
		}
		var k celenv.ValueBounds
		var reads uint8
		bounds[i], k, reads = celenv.BoundSizes(c.res.Env, c.res.AST.NativeRep(), vars)
		v.reads |= reads
		if c.program == nil {
			vars[c.variable] = k
		}
	}
	costs := make([]uint64, len(checked))
	var last celenv.InputBound
	bounded := func(b celenv.InputBound) bool {
		for i, c := range checked {
			costs[i] = celenv.EstimateMaxCost(c.res.Env, c.res.AST, bounds[i], b)
		}
		last = b
		return celenv.WithinLimits(costs)
	}
	v.untrackedWithin = celenv.LargestBounded(bounded)
	if v.untrackedWithin == (celenv.InputBound{}) {
		return
	}
	if last != v.untrackedWithin {
		bounded(v.untrackedWithin)
	}
	for i, c := range checked {
		if c.program != nil {
			continue
		}
		for j := range v.variables {
			if v.variables[j].Name == c.variable {
				v.variables[j].MaxCost = int64(costs[i])
			}
		}
	}
}

// ValidationIndexProperty is the report property naming the validation
// that failed or errored (0-based).
const ValidationIndexProperty = "cel.validationIndex"

// Validate evaluates the policy: the first variant whose matchConstraints
// select the request, then exceptions, matchConditions, validations
// (first failure wins) and audit annotations. ok is false when no variant
// selects the request.
func (vp *Policy) Validate(ctx context.Context, in *review.View, cfg *review.Options, own celruntime.Owner) (review.RuleResponse, bool) {
	var v *variant
	for _, cand := range vp.variants {
		if cand.match.Matches(in) {
			v = cand
			break
		}
	}
	if v == nil {
		return review.RuleResponse{}, false
	}
	if v.lazy != nil {
		var fault string
		if v, fault = v.lazy.Compiled(); v == nil {
			return review.RuleResponse{Name: celruntime.RuleEvaluation, Type: review.TypeValidation, Action: vp.action, Status: review.StatusError, Message: fault}, true
		}
	}
	rr := review.RuleResponse{Name: "", Type: review.TypeValidation, Action: vp.action}
	// A staged policy (charter.dev/staged) enforces in namespaces labelled
	// charter.dev/enforcement=enforce, as staged ClusterPolicies do.
	if charter.IsStaged(own.Source.GetLabels()) && charter.Enforces(in.NamespaceLabels()) {
		rr.Action = review.Enforce
	}
	o := vp.evaluateVariant(ctx, in, cfg, v, &own, &rr)
	rr.Status, rr.Message = o.Status, o.Message
	if len(o.Props) > 0 {
		rr.Properties = o.Props
	}
	if rr.Status == review.StatusFail && own.Unscored {
		rr.Status = review.StatusWarn
	}
	return rr, true
}

// evaluation is the state of evaluating one ValidatingPolicy against
// a request. The policies of a request are evaluated one after another,
// so the request keeps one and each policy resets it (evaluationOf):
// the Pod Security set allocated its activation, evaluator, variables and
// library receivers seventeen times per review otherwise.
type evaluation struct {
	act  celruntime.PolicyActivation
	libs celruntime.LibReceivers
	eval celruntime.Evaluator
	vars celruntime.Variables
}

// evaluationOf returns the request's evaluation state, reset for a
// variant of a policy bound to namespace (of a namespaced policy).
func evaluationOf(ctx context.Context, in *review.View, cfg *review.Options, v *variant, namespace string) *evaluation {
	s, ok := in.VPol.(*evaluation)
	if !ok {
		s = &evaluation{}
		in.VPol = s
	}
	ci := celruntime.InputsOf(in)
	s.libs = celruntime.LibReceivers{Ctx: ctx, Loaders: &cfg.Loaders, Namespace: namespace}
	s.act = celruntime.PolicyActivation{
		Activation: celruntime.Activation{In: ci, Object: ci.Object, OldObject: ci.OldObject, Params: types.NullValue, Variables: &s.vars},
		Libs:       &s.libs,
	}
	s.eval = celruntime.Evaluator{Act: &s.act, Budget: celconfig.RuntimeCELCostBudget,
		Untracked: v.untrackedWithin.Holds(ci.InputSizes(v.reads))}
	vals := s.vars.Vals
	if cap(vals) < len(v.variables) {
		vals = make([]ref.Val, len(v.variables))
	} else {
		vals = vals[:len(v.variables)]
		clear(vals)
	}
	s.vars = celruntime.Variables{Eval: &s.eval, Defs: v.variables, Vals: vals, Inputs: ci}
	return s
}

func (vp *Policy) evaluateVariant(ctx context.Context, in *review.View, cfg *review.Options, v *variant, own *celruntime.Owner, rr *review.RuleResponse) review.Outcome {
	s := evaluationOf(ctx, in, cfg, v, vp.namespace)
	act, e := &s.act, &s.eval

	allowed, exempt, err := own.EvalExceptions(e, in.Scope, false)
	if err != nil {
		rr.Name = celruntime.RuleException
		return review.Errorf("failed to evaluate exception: %v", err)
	}
	if exempt != nil {
		rr.Name = celruntime.RuleException
		rr.Exceptions = nil
		return exempt.Outcome()
	}
	act.Exceptions = allowed

	var condErrs []string
	for i := range v.conditions {
		val, err := e.Eval(&v.conditions[i])
		switch {
		case err != nil:
			condErrs = append(condErrs, err.Error())
		case val != types.True:
			return review.Skip("skip")
		}
	}
	if len(condErrs) > 0 {
		if vp.ignore {
			return review.Skip("skip")
		}
		rr.Name = celruntime.RuleEvaluation
		return review.Errorf("failed to load context: %s", strings.Join(condErrs, "; "))
	}
	result := review.Pass("success")
	for i := range v.validations {
		x := &v.validations[i]
		val, err := e.Eval(&x.Program)
		if err != nil {
			o := review.Errorf("error: %v", err)
			o.Props = validationIndex(i)
			return o
		}
		if val == types.True {
			continue
		}
		result = review.Fail(e.ValidationMessage(x, i))
		result.Props = validationIndex(i)
		break
	}
	owned := false // result.props may be validationIndex's, which is shared
	for i := range v.annotations {
		a := &v.annotations[i]
		val, err := e.Eval(&a.Program)
		if err != nil {
			return review.Errorf("error: audit annotation %s: %v", a.Key, err)
		}
		if s, ok := val.(types.String); ok && s != "" {
			if !owned {
				props := make(map[string]string, len(result.Props)+1)
				maps.Copy(props, result.Props)
				result.Props, owned = props, true
			}
			result.Props[a.Key] = string(s)
		}
	}
	return result
}

// validationIndexes are the properties naming each of the first
// validations, made once and shared by every result naming one: like
// every RuleResponse.Properties, they are read, never written.
var validationIndexes = func() (out [32]map[string]string) {
	for i := range out {
		out[i] = map[string]string{ValidationIndexProperty: strconv.Itoa(i)}
	}
	return out
}()

// validationIndex is the properties of a result that names validation i:
// needed only for a failure or an error, not for every validation that
// holds.
func validationIndex(i int) map[string]string {
	if i < len(validationIndexes) {
		return validationIndexes[i]
	}
	return map[string]string{ValidationIndexProperty: strconv.Itoa(i)}
}
