package cpol

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
)

// celRule is a compiled validate.cel block plus the rule's celPreconditions.
// Expressions are compiled with the compiler ValidatingAdmissionPolicy uses
// (k8s.io/apiserver's admission CEL plugin), so the libraries, type checks
// and cost limits are the API server's own.
type celRule struct {
	compiler *celruntime.Compiler
	// preconditions are the rule's celPreconditions (VAP matchConditions).
	preconditions []celruntime.Program
	expressions   []celruntime.Expression
	// paramKind is set when the rule reads params.
	paramKind *admissionregistrationv1.ParamKind
	paramRef  *admissionregistrationv1.ParamRef
}

// compileCEL compiles a validate.cel block and the rule's celPreconditions,
// or returns the rule compiled before from the same source when the set
// compiles with a CompileCache (WithCompileCache). path is the
// Validate block's field path; rulePath the rule's. celPreconditions on a
// rule of another type are refused (checkRule), as Kyverno refuses them.
func (s *Compiler) compileCEL(r *kyvernov1.Rule, c *kyvernov1.CEL, rulePath, path string, f *fault.Collector) *celRule {
	src := struct {
		Pre []admissionregistrationv1.MatchCondition `json:"p,omitempty"`
		CEL *kyvernov1.CEL                           `json:"c"`
	}{r.CELPreconditions, c}
	return celruntime.Cached(s.Cache, src, path+".cel", f, func() *celRule { return compileCELRule(r, c, rulePath, path, f) })
}

func compileCELRule(r *kyvernov1.Rule, c *kyvernov1.CEL, rulePath, path string, f *fault.Collector) *celRule {
	_, envCompiler, err := celruntime.Env()
	if err != nil {
		f.Add(path, "CEL environment: "+err.Error())
		return nil
	}
	out := &celRule{compiler: envCompiler.ForPolicy(), paramKind: c.ParamKind, paramRef: c.ParamRef}
	// authorizer is declared as in VAP; it is bound when the caller hands
	// an authorizer (celauthz.go), else reading it is a runtime error.
	decls := plugincel.OptionalVariableDeclarations{HasParams: c.ParamKind != nil, HasAuthorizer: true}
	fields := celruntime.Fields{Compiler: out.compiler, Decls: decls, Faults: f}
	fields.Variables(c.Variables, path+".cel.variables")
	out.preconditions = fields.Conditions(r.CELPreconditions, rulePath+".celPreconditions")
	if len(c.Expressions) == 0 {
		f.Add(path+".cel.expressions", "validate.cel needs at least one expression")
	}
	// messageExpression cannot use authorizer, as in VAP.
	msgDecls := decls
	msgDecls.HasAuthorizer = false
	for i, e := range c.Expressions {
		field := fmt.Sprintf("%s.cel.expressions[%d]", path, i)
		ce := celruntime.Expression{Program: celruntime.Program{Expr: e.Expression}, Message: e.Message}
		ce.Prog = fields.Program(&celruntime.Accessor{Expr: e.Expression, Returns: celruntime.BoolReturn()}, field+".expression")
		if e.MessageExpression != "" {
			if p := fields.ProgramWith(&celruntime.Accessor{Expr: e.MessageExpression, Returns: celruntime.StringReturn()}, field+".messageExpression", msgDecls); p != nil {
				ce.MessageExpr = &celruntime.Program{Expr: e.MessageExpression, Prog: p}
			}
		}
		out.expressions = append(out.expressions, ce)
	}
	return out
}

// cel evaluates a validate.cel rule: celPreconditions first (any false
// skips the rule, an error makes it an error), then every expression in
// order; the first that is not true, or that cannot be evaluated, fails the
// rule.
//
// replay evaluates the old object as the object of a CREATE, the way
// allowExistingViolations looks at the old object.
func (vd *validator) cel(ctx context.Context, c *celRule, replay bool) review.Outcome {
	act := celruntime.ActivationOf(vd.ev.in, replay)
	act.Scope = vd.ev.readScope()
	if c.paramKind == nil {
		return vd.celWith(ctx, c, act)
	}
	params, err := vd.ev.params(ctx, c)
	if err != nil {
		return review.Errorf("rule %s: %v", vd.rule.name, err)
	}
	if len(params) == 0 {
		// parameterNotFoundAction: Allow lets the request through
		// without evaluating, as a VAP binding does.
		return review.Skip("no params found")
	}
	// With several params (a paramRef.selector), the rule is evaluated
	// against each, as VAP does; the first that does not pass decides.
	var o review.Outcome
	for _, p := range params {
		act.Params = types.DefaultTypeAdapter.NativeToValue(p)
		if o = vd.celWith(ctx, c, act); o.Status != review.StatusPass {
			return o
		}
	}
	return o
}

// newCELEvaluator starts one evaluation of the rule's programs.
func newCELEvaluator(ctx context.Context, c *celRule, act *celruntime.Activation) *celruntime.Evaluator {
	cctx := c.compiler.CreateContext(ctx)
	act.Variables = cctx.Variables(act)
	return &celruntime.Evaluator{Ctx: cctx, Act: act, Budget: celconfig.RuntimeCELCostBudget}
}

// preconditions evaluates the rule's celPreconditions: nil when they all
// hold, a skip when one does not, an error when one cannot be evaluated.
func preconditions(e *celruntime.Evaluator, c *celRule, act *celruntime.Activation, rule string) *review.Outcome {
	for i := range c.preconditions {
		val, err := e.Eval(&c.preconditions[i])
		if err != nil {
			o := review.Errorf("failed to evaluate celPreconditions: %v", err)
			if act.WantedAuthorizer {
				o = errAuthorizer(rule)
			}
			return &o
		}
		if val != types.True {
			o := review.Skip("cel preconditions not met")
			return &o
		}
	}
	return nil
}

// celWith evaluates the rule against one set of variables.
func (vd *validator) celWith(ctx context.Context, c *celRule, act *celruntime.Activation) review.Outcome {
	e := newCELEvaluator(ctx, c, act)
	if o := preconditions(e, c, act, vd.rule.name); o != nil {
		return *o
	}
	for i := range c.expressions {
		x := &c.expressions[i]
		val, err := e.Eval(&x.Program)
		if err != nil {
			if act.WantedAuthorizer {
				return errAuthorizer(vd.rule.name)
			}
			// Kyverno evaluates the rule as a VAP with failurePolicy Fail,
			// where an evaluation error denies: the rule fails with the
			// error, it is not an error result (the conformance suites
			// disallow-all-secrets and disallow-secrets-from-env-vars
			// expect fail from an expression that cannot evaluate).
			if errors.Is(err, celruntime.ErrBudget) {
				return review.Fail(err.Error())
			}
			return review.Fail(fmt.Sprintf("expression '%s' resulted in error: %v", x.Expr, err))
		}
		if val == types.True {
			continue
		}
		return review.Fail(e.Message(x))
	}
	// Kyverno's CEL handler, like its podSecurity one, capitalises the
	// pass message.
	return review.Pass("Validation rule '" + vd.rule.name + "' passed.")
}

// errAuthorizer is the outcome of a rule whose expression needs
// authorizer where the evaluation has none (the CLI, background scans and
// the background controller: authorizer is bound at admission only, as
// in VAP): an error, not a failure, since the policy is not at fault.
func errAuthorizer(rule string) review.Outcome {
	return review.Errorf("rule %s: the CEL authorizer is only available at admission", rule)
}

// errNoParamLoader is the error of a rule with a paramKind evaluated
// without a loader of params or objects.
var errNoParamLoader = errors.New("paramKind needs params, and no loader of params was given")

// params returns the parameter objects the rule's paramKind and paramRef
// select, read through the params loader (the cluster's informers) or
// else the loader of existing objects (the CLI's), as a VAP binding
// reads them: paramRef.name or paramRef.selector picks them; without
// paramRef.namespace they are looked for in the request's namespace, or
// among cluster-scoped objects. A namespaced policy reads params in its
// own namespace only. None found is an error unless
// parameterNotFoundAction is Allow.
func (ev *evaluation) params(ctx context.Context, c *celRule) ([]map[string]any, error) {
	l := ev.cfg.Loaders.Params
	if l == nil {
		l = ev.cfg.Loaders.Objects
	}
	if l == nil {
		return nil, errNoParamLoader
	}
	q := loader.ObjectQuery{APIVersion: c.paramKind.APIVersion, Kind: c.paramKind.Kind}
	if ref := c.paramRef; ref != nil {
		q.Name, q.Namespace, q.Selector = ref.Name, ref.Namespace, ref.Selector
	}
	own := ev.readScope()
	if own != "" {
		if q.Namespace != "" && q.Namespace != own {
			return nil, fmt.Errorf("paramRef.namespace: %w", celruntime.OutOfScope("read params of", own, q.Namespace))
		}
		q.Namespace = own
	}
	sel := labels.Everything()
	if q.Selector != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(q.Selector); err != nil {
			return nil, fmt.Errorf("paramRef.selector: %w", err)
		}
	}
	objs, err := l.Objects(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("failed to load params: %w", err)
	}
	var out []map[string]any
	for _, obj := range objs {
		if !querySelects(q, obj, sel) {
			continue
		}
		ns := review.RefOf(obj).Namespace
		if own != "" && ns != own {
			// Cluster-scoped params, or a loader that returned more.
			continue
		}
		if q.Namespace == "" && ns != "" && ns != ev.in.Res.Namespace {
			continue
		}
		out = append(out, obj)
	}
	if len(out) == 0 && (c.paramRef == nil || c.paramRef.ParameterNotFoundAction == nil ||
		*c.paramRef.ParameterNotFoundAction != admissionregistrationv1.AllowAction) {
		return nil, fmt.Errorf("no params found for %s %s", c.paramKind.APIVersion, c.paramKind.Kind)
	}
	return out, nil
}
