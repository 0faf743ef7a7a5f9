package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/review"
)

// celRule is a compiled validate.cel block plus the rule's celPreconditions.
// Expressions are compiled with the compiler ValidatingAdmissionPolicy uses
// (k8s.io/apiserver's admission CEL plugin), so the libraries, type checks
// and cost limits are the API server's own.
type celRule struct {
	compiler *celCompiler
	// preconditions are the rule's celPreconditions (VAP matchConditions).
	preconditions []celProgram
	expressions   []celExpression
	// paramKind is set when the rule reads params.
	paramKind *admissionregistrationv1.ParamKind
	paramRef  *admissionregistrationv1.ParamRef
}

type celProgram struct {
	expr    string
	program celgo.Program
	// untracked is the program without runtime cost tracking, for a
	// ValidatingPolicy variant bounded at the request's input size
	// (celcost.go); nil otherwise.
	untracked celgo.Program
}

type celExpression struct {
	celProgram
	message string
	// messageExpr is the compiled messageExpression, if any.
	messageExpr *celProgram
}

// celAccessor is an expression handed to the apiserver compiler, with the
// types it must return.
type celAccessor struct {
	name, expr string
	returns    []*celgo.Type
}

func (a *celAccessor) GetExpression() string      { return a.expr }
func (a *celAccessor) ReturnTypes() []*celgo.Type { return a.returns }
func (a *celAccessor) GetName() string            { return a.name }
func boolReturn() []*celgo.Type                   { return []*celgo.Type{celgo.BoolType} }
func stringReturn() []*celgo.Type                 { return []*celgo.Type{celgo.StringType} }
func anyReturn() []*celgo.Type                    { return []*celgo.Type{celgo.AnyType} }

// The base environment is built on first use: policy sets without CEL
// rules never pay for it. celRuleCompiler compiles every validate.cel rule
// in it.
var (
	celEnvOnce      sync.Once
	celBaseEnv      *environment.EnvSet
	celRuleCompiler *celEnvCompiler
	celEnvErr       error
)

func celEnv() (*environment.EnvSet, *celEnvCompiler, error) {
	celEnvOnce.Do(func() {
		celBaseEnv, celEnvErr = celenv.WithLenientOrValue(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
		if celEnvErr == nil {
			celRuleCompiler, celEnvErr = newCELEnvCompiler(celBaseEnv, false)
		}
	})
	return celBaseEnv, celRuleCompiler, celEnvErr
}

// celRules holds the compiled CEL rules still in use, by source, so that
// compiling the same rule again (every Git revision recompiles its policies;
// Compile and Compiler.Assemble compile the same policy apart) reuses the
// programs instead of type-checking them again. Entries go when nothing
// Holds the rule any more.
var celRules weakCache[celRule]

// compileCEL compiles a validate.cel block and the rule's celPreconditions,
// or returns the rule compiled before from the same source. path is the
// validate block's field path; rulePath the rule's. celPreconditions on a
// rule of another type are refused (checkRule), as Kyverno refuses them.
func (s *PolicySet) compileCEL(r *kyvernov1.Rule, c *kyvernov1.CEL, rulePath, path string, f *fault.Collector) *celRule {
	src := struct {
		Pre []admissionregistrationv1.MatchCondition `json:"p,omitempty"`
		CEL *kyvernov1.CEL                           `json:"c"`
	}{r.CELPreconditions, c}
	return celRules.compile(src, path+".cel", f, func() *celRule { return compileCELRule(r, c, rulePath, path, f) })
}

func compileCELRule(r *kyvernov1.Rule, c *kyvernov1.CEL, rulePath, path string, f *fault.Collector) *celRule {
	_, envCompiler, err := celEnv()
	if err != nil {
		f.Add(path, "CEL environment: "+err.Error())
		return nil
	}
	out := &celRule{compiler: envCompiler.forPolicy(), paramKind: c.ParamKind, paramRef: c.ParamRef}
	// authorizer is declared as in VAP; it is bound when the caller hands
	// an authorizer (celauthz.go), else reading it is a runtime error.
	decls := plugincel.OptionalVariableDeclarations{HasParams: c.ParamKind != nil, HasAuthorizer: true}
	fields := celFields{compiler: out.compiler, decls: decls, f: f}
	fields.variables(c.Variables, path+".cel.variables")
	out.preconditions = fields.conditions(r.CELPreconditions, rulePath+".celPreconditions")
	if len(c.Expressions) == 0 {
		f.Add(path+".cel.expressions", "validate.cel needs at least one expression")
	}
	// messageExpression cannot use authorizer, as in VAP.
	msgDecls := decls
	msgDecls.HasAuthorizer = false
	for i, e := range c.Expressions {
		field := fmt.Sprintf("%s.cel.expressions[%d]", path, i)
		ce := celExpression{celProgram: celProgram{expr: e.Expression}, message: e.Message}
		ce.program = fields.program(&celAccessor{expr: e.Expression, returns: boolReturn()}, field+".expression")
		if e.MessageExpression != "" {
			if p := fields.programWith(&celAccessor{expr: e.MessageExpression, returns: stringReturn()}, field+".messageExpression", msgDecls); p != nil {
				ce.messageExpr = &celProgram{expr: e.MessageExpression, program: p}
			}
		}
		out.expressions = append(out.expressions, ce)
	}
	return out
}

// celFault is a compile error on one line: CEL's report quotes the
// expression under each error with a caret, which the position already
// gives and which a one-line fault (status conditions, CLI warnings)
// cannot show.
func celFault(detail string) string {
	var kept []string
	for _, line := range strings.Split(detail, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "|") {
			kept = append(kept, t)
		}
	}
	return strings.Join(kept, "; ")
}

// celInputs are a request's CEL variables other than params and variables,
// built once per request and shared by every CEL rule.
type celInputs struct {
	object, oldObject ref.Val
	// request and namespace are built on first read (requestValue,
	// namespaceValue): most policies never read them, and building them
	// allocates a dozen maps, or looks the namespace up.
	request, namespace ref.Val
	view               *requestView
	// adapter wraps the request's values for every expression of every
	// policy that reads them.
	adapter celenv.SharedAdapter
	// sharedVariables are the values of the policies' variables that
	// depend on the request alone, by canonical expression (celVariables).
	sharedVariables sharedValues
	// namespaceObject is what namespace wraps.
	namespaceObject map[string]any
	// sizes are inputSizes' answers by input, once asked (measured
	// false before).
	sizes    [celenv.InputCount]celenv.InputBound
	measured [celenv.InputCount]bool
}

// inputSizes are the length of the longest string and the size of the
// largest list or map in the inputs of reads (a set of 1<<input), or past
// celenv.LargestBound: what decides whether a bounded ValidatingPolicy variant,
// which reads those, may run untracked (celcost.go). Each input is
// measured once per request.
func (ci *celInputs) inputSizes(reads uint8) celenv.InputBound {
	var size celenv.InputBound
	for i := range celenv.InputCount {
		if reads&(1<<i) == 0 {
			continue
		}
		if !ci.measured[i] {
			ci.sizes[i], ci.measured[i] = ci.measure(i), true
		}
		size.Strings = max(size.Strings, ci.sizes[i].Strings)
		size.Lists = max(size.Lists, ci.sizes[i].Lists)
	}
	return size
}

// measure is inputSizes for one input.
func (ci *celInputs) measure(i int) celenv.InputBound {
	in := ci.view
	switch i {
	case celenv.InputObject:
		return celenv.ValueSizes(in.Req.Object, celenv.LargestBound)
	case celenv.InputOldObject:
		return celenv.ValueSizes(in.Req.OldObject, celenv.LargestBound)
	case celenv.InputNamespace:
		ci.namespaceValue()
		return celenv.ValueSizes(ci.namespaceObject, celenv.LargestBound)
	}
	// request, by the fields admissionRequest reads, without building it.
	u := in.Req.UserInfo
	size := celenv.InputBound{Lists: max(len(u.Groups), len(u.Extra)),
		Strings: max(len(u.Username), len(u.UID),
			len(in.Res.Name), len(in.Res.Namespace), len(in.Req.SubResource), len(in.Op),
			len(in.GVK.Group), len(in.GVK.Version), len(in.GVK.Kind),
			len(in.Req.Resource.Group), len(in.Req.Resource.Version), len(in.Req.Resource.Resource))}
	for _, g := range u.Groups {
		size.Strings = max(size.Strings, len(g))
	}
	for k, vals := range u.Extra {
		size.Strings = max(size.Strings, len(k))
		size.Lists = max(size.Lists, len(vals))
		for _, v := range vals {
			size.Strings = max(size.Strings, len(v))
		}
	}
	// request.object and request.oldObject are the objects.
	for _, obj := range []int{celenv.InputObject, celenv.InputOldObject} {
		o := ci.inputSizes(1 << obj)
		size.Strings = max(size.Strings, o.Strings)
		size.Lists = max(size.Lists, o.Lists)
	}
	return size
}

// celInputs builds the request's CEL variables on first use. The objects
// are wrapped, not copied: the CEL adapter reads the unstructured maps in
// place.
func (in *requestView) celInputs() *celInputs {
	if ci, ok := in.CEL.(*celInputs); ok {
		return ci
	}
	ci := &celInputs{object: types.NullValue, oldObject: types.NullValue, view: in}
	ci.adapter.UseHints()
	if in.Req.Object != nil {
		ci.object = ci.adapter.NativeToValue(in.Req.Object)
	}
	if in.Req.OldObject != nil {
		ci.oldObject = ci.adapter.NativeToValue(in.Req.OldObject)
	}
	in.CEL = ci
	return ci
}

// namespaceValue is `namespaceObject`, built on first use: the namespace
// object from the loader, or what the engine knows of the namespace (its
// name and labels), or null for a cluster-scoped object or a Namespace.
func (ci *celInputs) namespaceValue() ref.Val {
	if ci.namespace != nil {
		return ci.namespace
	}
	ci.namespace = types.NullValue
	in := ci.view
	ns := in.Res.Namespace
	if ns == "" || (in.GVK.Kind == "Namespace" && in.GVK.Group == "") {
		return ci.namespace
	}
	if l, ok := in.Opts.Loaders.Namespaces.(loader.NamespaceObjectLoader); ok {
		if obj, err := l.NamespaceObject(in.Ctx, ns); err == nil && obj != nil {
			ci.namespaceObject = obj
		}
	}
	if ci.namespaceObject == nil {
		// The part of namespaceObject a policy can rely on here.
		meta := map[string]any{"name": ns}
		if labels := in.NamespaceLabels(); len(labels) > 0 {
			l := make(map[string]any, len(labels))
			for k, v := range labels {
				l[k] = v
			}
			meta["labels"] = l
		}
		ci.namespaceObject = map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
	}
	ci.namespace = ci.adapter.NativeToValue(ci.namespaceObject)
	return ci.namespace
}

// requestValue is `request`, built on first use.
func (ci *celInputs) requestValue() ref.Val {
	if ci.request == nil {
		ci.request = ci.adapter.NativeToValue(ci.view.admissionRequest(ci.view.Op))
	}
	return ci.request
}

// admissionRequest is the AdmissionRequest exposed as `request`: VAP's,
// plus the objects, which Kyverno's CEL policies read there too.
func (in *requestView) admissionRequest(op kyvernov1.AdmissionOperation) map[string]any {
	gvk := map[string]any{"group": in.GVK.Group, "version": in.GVK.Version, "kind": in.GVK.Kind}
	gvr := map[string]any{"group": in.Req.Resource.Group, "version": in.Req.Resource.Version, "resource": in.Req.Resource.Resource}
	u := in.Req.UserInfo
	groups := make([]any, len(u.Groups))
	for i, g := range u.Groups {
		groups[i] = g
	}
	user := map[string]any{"username": u.Username, "uid": u.UID, "groups": groups}
	if len(u.Extra) > 0 {
		extra := make(map[string]any, len(u.Extra))
		for k, vals := range u.Extra {
			list := make([]any, len(vals))
			for i, v := range vals {
				list[i] = v
			}
			extra[k] = list
		}
		user["extra"] = extra
	}
	// object and oldObject are there for Kyverno's CEL policies, whose
	// request type declares them (withRequestVariables); VAP's does not.
	var object, oldObject any
	if in.Req.Object != nil {
		object = in.Req.Object
	}
	if in.Req.OldObject != nil {
		oldObject = in.Req.OldObject
	}
	return map[string]any{
		"object":             object,
		"oldObject":          oldObject,
		"kind":               gvk,
		"resource":           gvr,
		"subResource":        in.Req.SubResource,
		"requestKind":        gvk,
		"requestResource":    gvr,
		"requestSubResource": in.Req.SubResource,
		"name":               in.Res.Name,
		"namespace":          in.Res.Namespace,
		"operation":          string(op),
		"userInfo":           user,
		"dryRun":             in.Req.DryRun,
	}
}

// celActivation resolves the variables of one CEL evaluation.
type celActivation struct {
	in        *celInputs
	object    ref.Val
	oldObject ref.Val
	// request nil is the request's own (celInputs.requestValue).
	request   ref.Val
	params    ref.Val
	variables ref.Val
	// wantedAuthorizer records that an expression asked for authorizer
	// and the evaluation has none to bind.
	wantedAuthorizer bool
	// scope is the namespace of a namespaced policy, which its authorizer
	// checks stay in; "" for a cluster policy.
	scope string
	// authorizer and requestResourceAuthorizer are bound on first read.
	authorizer, requestResourceAuthorizer ref.Val
}

func (a *celActivation) ResolveName(name string) (any, bool) {
	switch name {
	case plugincel.ObjectVarName:
		return a.object, true
	case plugincel.OldObjectVarName:
		return a.oldObject, true
	case plugincel.RequestVarName:
		if a.request == nil {
			return a.in.requestValue(), true
		}
		return a.request, true
	case plugincel.NamespaceVarName:
		return a.in.namespaceValue(), true
	case plugincel.ParamsVarName:
		return a.params, true
	case plugincel.VariableVarName:
		return a.variables, true
	case plugincel.AuthorizerVarName, plugincel.RequestResourceAuthorizerVarName:
		if v := a.authorizerValue(name); v != nil {
			return v, true
		}
		a.wantedAuthorizer = true
	}
	return nil, false
}

func (a *celActivation) Parent() interpreter.Activation { return nil }

var errCELBudget = errors.New("validation failed due to running out of cost budget, no further validation rules will be run")

// celEvaluator runs one rule's programs against one activation within the
// rule's runtime cost budget (VAP's per-policy budget).
type celEvaluator struct {
	// ctx charges the variables of k8s' lazy map (celComposition); nil
	// when variables are a celVariables, which charges variablesCost.
	ctx    plugincel.CompositionContext
	act    interpreter.Activation
	budget int64
	// variablesCost is what celVariables evaluated since the last eval.
	variablesCost int64
	// untracked runs the programs' untracked plans: the variant is
	// bounded at the request's input size (celcost.go), so no program
	// can exceed its limits and none is charged.
	untracked bool
}

// eval runs a program. It is Eval, not ContextEval: ContextEval makes a
// cancellable context per call (two allocations, over fifty a review for
// the Pod Security set as ValidatingPolicies) only so that a cancelled
// request interrupts a comprehension. What bounds an expression is the
// cost limit, which Eval enforces too (per call, and the budget here
// across the policy's expressions).
func (e *celEvaluator) eval(p *celProgram) (ref.Val, error) {
	if e.untracked && p.untracked != nil {
		val, _, err := p.untracked.Eval(e.act)
		e.variablesCost = 0
		if err != nil {
			return nil, err
		}
		return val, nil
	}
	val, details, err := p.program.Eval(e.act)
	// Variables are evaluated lazily and charge their cost to the context
	// (or to variablesCost, celVariables).
	cost := e.variablesCost
	if e.ctx != nil {
		cost += e.ctx.GetAndResetCost()
	}
	e.variablesCost = 0
	cost += actualCost(details)
	e.budget -= cost
	if e.budget < 0 {
		return nil, errCELBudget
	}
	if err != nil {
		return nil, err
	}
	return val, nil
}

// actualCost is what an evaluation cost, by its details.
func actualCost(details *celgo.EvalDetails) int64 {
	if details == nil || details.ActualCost() == nil {
		return 0
	}
	return int64(min(*details.ActualCost(), math.MaxInt64))
}

// cel evaluates a validate.cel rule: celPreconditions first (any false
// skips the rule, an error makes it an error), then every expression in
// order; the first that is not true, or that cannot be evaluated, fails the
// rule.
//
// replay evaluates the old object as the object of a CREATE, the way
// allowExistingViolations looks at the old object.
func (vd *validator) cel(ctx context.Context, c *celRule, replay bool) review.Outcome {
	act := vd.ev.in.celActivation(replay)
	act.scope = vd.ev.readScope()
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
		act.params = types.DefaultTypeAdapter.NativeToValue(p)
		if o = vd.celWith(ctx, c, act); o.Status != review.StatusPass {
			return o
		}
	}
	return o
}

// celActivation binds the request's CEL variables. replay evaluates the
// old object as the object of a CREATE.
func (in *requestView) celActivation(replay bool) *celActivation {
	ci := in.celInputs()
	act := &celActivation{in: ci, object: ci.object, oldObject: ci.oldObject, params: types.NullValue}
	if replay {
		act.object = ci.oldObject
		act.oldObject = types.NullValue
		act.request = types.DefaultTypeAdapter.NativeToValue(in.admissionRequest(kyvernov1.Create))
	}
	return act
}

// newCELEvaluator starts one evaluation of the rule's programs.
func newCELEvaluator(ctx context.Context, c *celRule, act *celActivation) *celEvaluator {
	cctx := c.compiler.CreateContext(ctx)
	act.variables = cctx.Variables(act)
	return &celEvaluator{ctx: cctx, act: act, budget: celconfig.RuntimeCELCostBudget}
}

// preconditions evaluates the rule's celPreconditions: nil when they all
// hold, a skip when one does not, an error when one cannot be evaluated.
func (e *celEvaluator) preconditions(c *celRule, act *celActivation, rule string) *review.Outcome {
	for i := range c.preconditions {
		val, err := e.eval(&c.preconditions[i])
		if err != nil {
			o := review.Errorf("failed to evaluate celPreconditions: %v", err)
			if act.wantedAuthorizer {
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
func (vd *validator) celWith(ctx context.Context, c *celRule, act *celActivation) review.Outcome {
	e := newCELEvaluator(ctx, c, act)
	if o := e.preconditions(c, act, vd.rule.name); o != nil {
		return *o
	}
	for i := range c.expressions {
		x := &c.expressions[i]
		val, err := e.eval(&x.celProgram)
		if err != nil {
			if act.wantedAuthorizer {
				return errAuthorizer(vd.rule.name)
			}
			// Kyverno evaluates the rule as a VAP with failurePolicy Fail,
			// where an evaluation error denies: the rule fails with the
			// error, it is not an error result (the conformance suites
			// disallow-all-secrets and disallow-secrets-from-env-vars
			// expect fail from an expression that cannot evaluate).
			if errors.Is(err, errCELBudget) {
				return review.Fail(err.Error())
			}
			return review.Fail(fmt.Sprintf("expression '%s' resulted in error: %v", x.expr, err))
		}
		if val == types.True {
			continue
		}
		return review.Fail(e.message(x))
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

// message is VAP's failure message: messageExpression's result when it
// evaluates to a non-blank single-line string within the size limit, else
// message, else "failed expression: <expression>".
func (e *celEvaluator) message(x *celExpression) string {
	if x.messageExpr != nil {
		if val, err := e.eval(x.messageExpr); err == nil {
			if s, ok := val.Value().(string); ok {
				s = strings.TrimSpace(s)
				if s != "" && len(s) <= celconfig.MaxEvaluatedMessageExpressionSizeBytes && !strings.Contains(s, "\n") {
					return s
				}
			}
		}
	}
	if m := strings.TrimSpace(x.message); m != "" {
		return m
	}
	return "failed expression: " + strings.TrimSpace(x.expr)
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
			return nil, fmt.Errorf("paramRef.namespace: %w", outOfScope("read params of", own, q.Namespace))
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
		ns := refOf(obj).Namespace
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
