package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unique"

	celgo "github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/charter-dev/charter/api/charter"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/autogen"
	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/review"
)

// validatingPolicy is a compiled ValidatingPolicy or
// NamespacedValidatingPolicy (cel-policy-types.md §3.3.1): one result per
// matching request, with rule "", from its matchConstraints,
// matchConditions, variables, validations and auditAnnotations, evaluated
// through the VAP CEL compiler extended with Kyverno's libraries.
type validatingPolicy struct {
	// namespace is set for a NamespacedValidatingPolicy, which acts only on
	// requests in its namespace.
	namespace string
	kind      string
	// variants are the policy itself, then its autogen copies for Pod
	// controllers; their match constraints do not overlap.
	variants []*vpolVariant
	// ignore is failurePolicy Ignore: a matchCondition error skips.
	ignore bool
	action review.Action
}

type vpolVariant struct {
	match *constraints
	// lazy is set on an autogen copy until compiled (compiled()).
	lazy        *lazyVariant[policiesv1.ValidatingPolicySpec, vpolVariant]
	compiler    *celCompiler
	conditions  []celProgram
	variables   []celVariable
	validations []celExpression
	annotations []vpolAnnotation
	// untrackedWithin is the input bound within which every program of
	// the variant runs without cost tracking (celcost.go); zero: never.
	untrackedWithin celenv.InputBound
	// reads are the inputs its programs read (a set of 1<<input), which
	// must be within untrackedWithin.
	reads uint8
}

type vpolAnnotation struct {
	key string
	celProgram
}

var (
	vpolEnvOnce sync.Once
	vpolEnv     *environment.EnvSet
	vpolEnvErr  error
)

// celPolicyCompiler compiles the expressions of every policies.kyverno.io
// policy and exception in celPolicyEnv.
var celPolicyCompiler = sync.OnceValues(func() (*celEnvCompiler, error) {
	env, err := celPolicyEnv()
	if err != nil {
		return nil, err
	}
	return newCELEnvCompiler(env, true)
})

// celPolicyEnv is the environment of policies.kyverno.io policies: VAP's,
// with the lenient orValue validate.cel has, and Kyverno's libraries.
func celPolicyEnv() (*environment.EnvSet, error) {
	vpolEnvOnce.Do(func() {
		var base *environment.EnvSet
		if base, _, vpolEnvErr = celEnv(); vpolEnvErr == nil {
			vpolEnv, vpolEnvErr = withKyvernoLibraries(base)
		}
	})
	return vpolEnv, vpolEnvErr
}

// celValidationAction checks the validationActions and evaluation mode of a
// ValidatingPolicy or ImageValidatingPolicy and returns the action charter
// takes: Enforce when Deny is among them (the default, [Deny], when none is
// set), Audit otherwise.
func celValidationAction(actions []admissionregistrationv1.ValidationAction, eval *policiesv1.EvaluationConfiguration, f *fault.Collector) review.Action {
	for i, a := range actions {
		switch a {
		case admissionregistrationv1.Deny, admissionregistrationv1.Audit, admissionregistrationv1.Warn:
		default:
			f.Add(fmt.Sprintf("spec.validationActions[%d]", i), fmt.Sprintf("unknown action %q, want Deny, Audit or Warn", a))
		}
	}
	if eval != nil && eval.Mode != "" && eval.Mode != policiesv1.EvaluationModeKubernetes {
		f.Add("spec.evaluation.mode", fmt.Sprintf("evaluation mode %q is not supported by charter (only Kubernetes)", eval.Mode))
	}
	if len(actions) == 0 || slices.Contains(actions, admissionregistrationv1.Deny) {
		return review.Enforce
	}
	return review.Audit
}

func (s *PolicySet) compileValidatingPolicy(src policiesv1.ValidatingPolicyLike, p *Policy) fault.List {
	spec := src.GetValidatingPolicySpec()
	f := &fault.Collector{Kind: src.GetKind(), Name: p.key}
	vp := &validatingPolicy{kind: src.GetKind(), ignore: spec.GetFailurePolicy() == admissionregistrationv1.Ignore,
		action: celValidationAction(spec.ValidationAction, spec.EvaluationConfiguration, f)}
	if src.IsNamespaced() {
		vp.namespace = src.GetNamespace()
	}
	if len(spec.Validations) == 0 && len(spec.AuditAnnotations) == 0 {
		f.Add("spec.validations", "a ValidatingPolicy needs at least one validation or audit annotation")
	}
	vp.variants = compileVariants(spec, autogen.ValidatingPolicy, compileVPolVariant,
		func(m *constraints, l *lazyVariant[policiesv1.ValidatingPolicySpec, vpolVariant]) *vpolVariant {
			return &vpolVariant{match: m, lazy: l}
		}, f)
	if len(f.Errs) > 0 {
		return f.Errs
	}
	p.vpol = vp
	p.kinds = []string{"*"}
	return nil
}

// compiledVariants holds the compiled variants still in use, by source,
// as celRules does for validate.cel.
var compiledVariants weakCache[vpolVariant]

func compileVPolVariant(spec *policiesv1.ValidatingPolicySpec, path string, f *fault.Collector) *vpolVariant {
	return compiledVariants.compile(spec, path, f, func() *vpolVariant { return compileVPolVariantUncached(spec, path, f) })
}

func compileVPolVariantUncached(spec *policiesv1.ValidatingPolicySpec, path string, f *fault.Collector) *vpolVariant {
	envCompiler, err := celPolicyCompiler()
	if err != nil {
		f.Add(path, "CEL environment: "+err.Error())
		return nil
	}
	v := &vpolVariant{compiler: envCompiler.forPolicy()}
	if v.match, err = compileConstraints(spec.MatchConstraints); err != nil {
		f.Add(path+".matchConstraints", err.Error())
	}
	// params and authorizer are never bound for these kinds: every
	// expression compiles through compileChecked, whose checked
	// expressions give the variant's cost estimates (boundVariant).
	var checked []vpolChecked
	compile := func(a *celAccessor, field string) *celProgram {
		if strings.TrimSpace(a.expr) == "" {
			f.Add(field, "expression must not be empty")
			return nil
		}
		res := v.compiler.compileChecked(a, environment.StoredExpressions)
		if res.Error != nil {
			f.Add(field, celFault(res.Error.Detail))
			return nil
		}
		p := &celProgram{expr: a.expr, program: res.Program, untracked: res.untracked}
		checked = append(checked, vpolChecked{res: res, program: p})
		return p
	}
	// matchConditions compile before the variables are stored, so they
	// cannot use them, as in Kyverno.
	for i, mc := range spec.MatchConditions {
		field := fmt.Sprintf("%s.matchConditions[%d].expression", path, i)
		if p := compile(&celAccessor{name: mc.Name, expr: mc.Expression, returns: boolReturn()}, field); p != nil {
			v.conditions = append(v.conditions, *p)
		}
	}
	for i, vr := range spec.Variables {
		field := fmt.Sprintf("%s.variables[%d]", path, i)
		if vr.Name == "" {
			f.Add(field+".name", "a variable needs a name")
			continue
		}
		res := v.compiler.compileAndStoreChecked(&celAccessor{name: vr.Name, expr: vr.Expression, returns: anyReturn()}, environment.StoredExpressions)
		if res.Error != nil {
			f.Add(field+".expression", celFault(res.Error.Detail))
			continue
		}
		v.variables = append(v.variables, celVariable{name: vr.Name, program: res.Program, untracked: res.untracked, shared: sharedKeyOf(vr.Expression)})
		checked = append(checked, vpolChecked{res: res, variable: vr.Name})
	}
	for i, val := range spec.Validations {
		field := fmt.Sprintf("%s.validations[%d]", path, i)
		ce := celExpression{celProgram: celProgram{expr: val.Expression}, message: val.Message}
		if p := compile(&celAccessor{expr: val.Expression, returns: boolReturn()}, field+".expression"); p != nil {
			ce.celProgram = *p
		}
		if val.MessageExpression != "" {
			ce.messageExpr = compile(&celAccessor{expr: val.MessageExpression, returns: stringReturn()}, field+".messageExpression")
		}
		v.validations = append(v.validations, ce)
	}
	for i, a := range spec.AuditAnnotations {
		field := fmt.Sprintf("%s.auditAnnotations[%d]", path, i)
		if a.Key == "" {
			f.Add(field+".key", "an audit annotation needs a key")
		}
		before := len(f.Errs)
		p := compile(&celAccessor{expr: a.ValueExpression, returns: []*celgo.Type{celgo.StringType, celgo.NullType}}, field+".valueExpression")
		if len(f.Errs) > before && strings.Contains(f.Errs[before].Fault, "but got dyn") {
			// Kyverno refuses dyn here too; say how to fix it.
			f.Errs[before].Fault += " (wrap the expression in string(...))"
		}
		if p != nil {
			v.annotations = append(v.annotations, vpolAnnotation{key: a.Key, celProgram: *p})
		}
	}
	if len(f.Errs) == 0 {
		v.boundVariant(checked)
	}
	return v
}

// vpolChecked is a compiled expression of a variant and the program or
// variable it became.
type vpolChecked struct {
	res      checkedExpression
	program  *celProgram // nil for a variable
	variable string
}

// boundVariant finds the largest input bound at which every program of
// the variant stays within the per-call limit and all of them within the
// budget (celcost.go), and sets untrackedWithin to it; with none, or when
// a program has no untracked plan, the variant is always tracked. A
// variable's worst case at that bound is what sharing its value charges
// a tracked policy (celVariables.value).
func (v *vpolVariant) boundVariant(checked []vpolChecked) {
	bounds := make([]celenv.SizeBounds, len(checked))
	vars := map[string]celenv.ValueBounds{}
	for i, c := range checked {
		if c.res.untracked == nil || c.res.env == nil {
			return
		}
		var k celenv.ValueBounds
		var reads uint8
		bounds[i], k, reads = celenv.BoundSizes(c.res.env, c.res.ast.NativeRep(), vars)
		v.reads |= reads
		if c.program == nil {
			vars[c.variable] = k
		}
	}
	costs := make([]uint64, len(checked))
	var last celenv.InputBound
	bounded := func(b celenv.InputBound) bool {
		for i, c := range checked {
			costs[i] = celenv.EstimateMaxCost(c.res.env, c.res.ast, bounds[i], b)
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
			if v.variables[j].name == c.variable {
				v.variables[j].maxCost = int64(costs[i])
			}
		}
	}
}

// vpolActivation adds the library receivers and exceptions to a CEL
// activation.
type vpolActivation struct {
	celActivation
	libs       *libReceivers
	exceptions ref.Val
}

func (a *vpolActivation) ResolveName(name string) (any, bool) {
	if v, ok := a.libs.resolve(name); ok {
		return v, true
	}
	if name == exceptionsVar {
		return a.exceptions, true
	}
	return a.celActivation.ResolveName(name)
}

// Rule names of CEL policy results other than the policy's own "".
const (
	RuleException  = "exception"
	RuleEvaluation = "evaluation"
)

// validationIndexProperty is the report property naming the validation
// that failed or errored (0-based).
const validationIndexProperty = "cel.validationIndex"

// validateCEL evaluates a ValidatingPolicy: the first variant whose
// matchConstraints select the request, then exceptions, matchConditions,
// validations (first failure wins) and audit annotations.
func (p *Policy) validateCEL(ctx context.Context, in *requestView, cfg *review.Options) review.PolicyResponse {
	resp := review.PolicyResponse{Policy: p.source, Key: p.key}
	vp := p.vpol
	var v *vpolVariant
	for _, cand := range vp.variants {
		if cand.match.matches(in) {
			v = cand
			break
		}
	}
	if v == nil {
		return resp
	}
	if v.lazy != nil {
		var fault string
		if v, fault = v.lazy.compiled(); v == nil {
			start := len(in.rules)
			in.rules = append(in.rules, review.RuleResponse{Name: RuleEvaluation, Type: review.TypeValidation, Action: vp.action, Status: review.StatusError, Message: fault})
			resp.Rules = in.rules[start : start+1 : start+1]
			return resp
		}
	}
	rr := review.RuleResponse{Name: "", Type: review.TypeValidation, Action: vp.action}
	// A staged policy (charter.dev/staged) enforces in namespaces labelled
	// charter.dev/enforcement=enforce, as staged ClusterPolicies do.
	if charter.IsStaged(p.source.GetLabels()) && charter.Enforces(in.NamespaceLabels()) {
		rr.Action = review.Enforce
	}
	o := p.evaluateVariant(ctx, in, cfg, v, &rr)
	rr.Status, rr.Message = o.Status, o.Message
	if len(o.Props) > 0 {
		rr.Properties = o.Props
	}
	if rr.Status == review.StatusFail && p.unscored {
		rr.Status = review.StatusWarn
	}
	start := len(in.rules)
	in.rules = append(in.rules, rr)
	resp.Rules = in.rules[start : start+1 : start+1]
	return resp
}

// vpolEvaluation is the state of evaluating one ValidatingPolicy against
// a request. The policies of a request are evaluated one after another,
// so the request keeps one and each policy resets it (vpolEvaluation):
// the Pod Security set allocated its activation, evaluator, variables and
// library receivers seventeen times per review otherwise.
type vpolEvaluation struct {
	act  vpolActivation
	libs libReceivers
	eval celEvaluator
	vars celVariables
}

// vpolEvaluation returns the request's evaluation state, reset for a
// variant of a policy bound to namespace (of a namespaced policy).
func (in *requestView) vpolEvaluation(ctx context.Context, cfg *review.Options, v *vpolVariant, namespace string) *vpolEvaluation {
	s, ok := in.VPol.(*vpolEvaluation)
	if !ok {
		s = &vpolEvaluation{}
		in.VPol = s
	}
	ci := in.celInputs()
	s.libs = libReceivers{ctx: ctx, loaders: &cfg.Loaders, namespace: namespace}
	s.act = vpolActivation{
		celActivation: celActivation{in: ci, object: ci.object, oldObject: ci.oldObject, params: types.NullValue, variables: &s.vars},
		libs:          &s.libs,
	}
	s.eval = celEvaluator{act: &s.act, budget: celconfig.RuntimeCELCostBudget,
		untracked: v.untrackedWithin.Holds(ci.inputSizes(v.reads))}
	vals := s.vars.vals
	if cap(vals) < len(v.variables) {
		vals = make([]ref.Val, len(v.variables))
	} else {
		vals = vals[:len(v.variables)]
		clear(vals)
	}
	s.vars = celVariables{e: &s.eval, defs: v.variables, vals: vals, inputs: ci}
	return s
}

func (p *Policy) evaluateVariant(ctx context.Context, in *requestView, cfg *review.Options, v *vpolVariant, rr *review.RuleResponse) review.Outcome {
	s := in.vpolEvaluation(ctx, cfg, v, p.vpol.namespace)
	act, e := &s.act, &s.eval

	allowed, exempt, err := p.celExceptions(e, in)
	if err != nil {
		rr.Name = RuleException
		return review.Errorf("failed to evaluate exception: %v", err)
	}
	if exempt != nil {
		rr.Name = RuleException
		rr.Exceptions = nil
		o := review.Skip("rule is skipped due to policy exception: " + exempt.keys())
		if exempt.pass {
			o = review.Pass("rule is passed due to policy exception: " + exempt.keys())
		}
		o.Props = map[string]string{"exceptions": exempt.names()}
		return o
	}
	act.exceptions = allowed

	var condErrs []string
	for i := range v.conditions {
		val, err := e.eval(&v.conditions[i])
		switch {
		case err != nil:
			condErrs = append(condErrs, err.Error())
		case val != types.True:
			return review.Skip("skip")
		}
	}
	if len(condErrs) > 0 {
		if p.vpol.ignore {
			return review.Skip("skip")
		}
		rr.Name = RuleEvaluation
		return review.Errorf("failed to load context: %s", strings.Join(condErrs, "; "))
	}
	result := review.Pass("success")
	for i := range v.validations {
		x := &v.validations[i]
		val, err := e.eval(&x.celProgram)
		if err != nil {
			o := review.Errorf("error: %v", err)
			o.Props = validationIndex(i)
			return o
		}
		if val == types.True {
			continue
		}
		result = review.Fail(e.vpolMessage(x, i))
		result.Props = validationIndex(i)
		break
	}
	owned := false // result.props may be validationIndex's, which is shared
	for i := range v.annotations {
		a := &v.annotations[i]
		val, err := e.eval(&a.celProgram)
		if err != nil {
			return review.Errorf("error: audit annotation %s: %v", a.key, err)
		}
		if s, ok := val.(types.String); ok && s != "" {
			if !owned {
				props := make(map[string]string, len(result.Props)+1)
				maps.Copy(props, result.Props)
				result.Props, owned = props, true
			}
			result.Props[a.key] = string(s)
		}
	}
	return result
}

// validationIndexes are the properties naming each of the first
// validations, made once and shared by every result naming one: like
// every RuleResponse.Properties, they are read, never written.
var validationIndexes = func() (out [32]map[string]string) {
	for i := range out {
		out[i] = map[string]string{validationIndexProperty: strconv.Itoa(i)}
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
	return map[string]string{validationIndexProperty: strconv.Itoa(i)}
}

// celVariable is a compiled variable of a policy.
type celVariable struct {
	name    string
	program celgo.Program
	// untracked is the program without cost tracking, and maxCost its
	// worst case within the variant's untrackedWithin (celcost.go).
	untracked celgo.Program
	maxCost   int64
	// shared is the key under which the variable's value is shared by
	// every policy of a request: its expression in canonical form, when
	// it reads nothing but the request (sharedVariableKey); the zero
	// handle otherwise.
	shared unique.Handle[string]
}

// sharedKeyOf is the handle of sharedVariableKey(expr), zero when the
// variable is not shared.
func sharedKeyOf(expr string) unique.Handle[string] {
	if key := sharedVariableKey(expr); key != "" {
		return unique.Make(key)
	}
	return unique.Handle[string]{}
}

// sharedVariable is a variable's value computed for one request, and
// what computing it cost.
type sharedVariable struct {
	key  unique.Handle[string]
	val  ref.Val
	cost int64
}

// sharedValues are the values of a request's shared variables, by key.
// The first sharedInline are in a slice found by comparing handles (a key
// is an expression, long to hash; a set declares few), the rest in a map.
type sharedValues struct {
	few  []sharedVariable
	more map[unique.Handle[string]]sharedVariable
}

const sharedInline = 16

func (s *sharedValues) get(key unique.Handle[string]) (sharedVariable, bool) {
	for i := range s.few {
		if s.few[i].key == key {
			return s.few[i], true
		}
	}
	sv, ok := s.more[key]
	return sv, ok
}

func (s *sharedValues) put(sv sharedVariable) {
	if len(s.few) < sharedInline {
		if s.few == nil {
			s.few = make([]sharedVariable, 0, sharedInline/2)
		}
		s.few = append(s.few, sv)
		return
	}
	if s.more == nil {
		s.more = map[unique.Handle[string]]sharedVariable{}
	}
	s.more[sv.key] = sv
}

func (s *sharedValues) len() int { return len(s.few) + len(s.more) }

// requestInputs are the variables that mean the same in every policy of a
// request.
var requestInputs = map[string]bool{
	plugincel.ObjectVarName: true, plugincel.OldObjectVarName: true,
	plugincel.RequestVarName: true, plugincel.NamespaceVarName: true,
}

var (
	macroParserOnce sync.Once
	macroParser     *celgo.Env
	macroParserErr  error
)

// macroTrackingParser is the policies' environment keeping the macro
// calls of what it parses, which unparsing a comprehension needs
// (celgo.AstToString).
func macroTrackingParser() (*celgo.Env, error) {
	macroParserOnce.Do(func() {
		var base *celgo.Env
		if base, macroParserErr = policyBaseEnv(); macroParserErr == nil {
			macroParser, macroParserErr = base.Extend(celgo.EnableMacroCallTracking())
		}
	})
	return macroParser, macroParserErr
}

// policyBaseEnv is the policies' environment before a compiler declares
// object, variables and the rest.
func policyBaseEnv() (*celgo.Env, error) {
	env, err := celPolicyEnv()
	if err != nil {
		return nil, err
	}
	return env.Env(environment.StoredExpressions)
}

// sharedVariableKey returns the canonical form of a variable's expression
// when its value depends on the request alone, so that policies declaring
// the same variable (the Pod Security set has nine allContainers) compute
// it once per request: when every identifier it reads is object,
// oldObject, request, namespaceObject or a loop variable of its own, and
// no loop variable hides a declared one. Otherwise, or when it does not
// parse, "".
func sharedVariableKey(expr string) string {
	base, err := policyBaseEnv()
	if err != nil {
		return ""
	}
	parser, err := macroTrackingParser()
	if err != nil {
		return ""
	}
	parsed, iss := parser.Parse(expr)
	if iss.Err() != nil {
		return ""
	}
	declared := map[string]bool{plugincel.VariableVarName: true, plugincel.ParamsVarName: true, plugincel.AuthorizerVarName: true}
	for _, d := range base.Variables() {
		declared[d.Name()] = true
	}
	nav := celast.NavigateAST(parsed.NativeRep())
	bound := map[string]bool{}
	for _, c := range celast.MatchDescendants(nav, celast.KindMatcher(celast.ComprehensionKind)) {
		comp := c.AsComprehension()
		for _, name := range []string{comp.IterVar(), comp.IterVar2(), comp.AccuVar()} {
			if name == "" {
				continue
			}
			if declared[name] || requestInputs[name] {
				return ""
			}
			bound[name] = true
		}
	}
	for _, id := range celast.MatchDescendants(nav, celast.KindMatcher(celast.IdentKind)) {
		if name := id.AsIdent(); !requestInputs[name] && !bound[name] {
			return ""
		}
	}
	key, err := celgo.AstToString(parsed)
	if err != nil {
		return ""
	}
	return key
}

// variablesType is the type of `variables`, as the composited compiler
// names it.
var variablesType = types.NewTypeValue("kubernetes.variables", traits.IndexerType|traits.FieldTesterType|traits.IterableType)

// celVariables is `variables` in one evaluation of a policy: each variable
// is evaluated when an expression first reads it, once, its cost charged
// to the evaluation's budget, as the composited compiler's own lazy map
// does. Unlike that map, it finds a variable by its name as written,
// without running a regular expression over the name on every read (a set
// of ValidatingPolicies reads its variables thousands of times a second).
type celVariables struct {
	e      *celEvaluator
	defs   []celVariable
	vals   []ref.Val
	inputs *celInputs // holds the request's shared variables
}

func (m *celVariables) index(key ref.Val) (int, ref.Val) {
	name, ok := key.(types.String)
	if !ok {
		return -1, types.MaybeNoSuchOverloadErr(key)
	}
	for i := range m.defs {
		if m.defs[i].name == string(name) {
			return i, nil
		}
	}
	return -1, nil
}

func (m *celVariables) value(i int) ref.Val {
	if m.vals == nil {
		m.vals = make([]ref.Val, len(m.defs))
	}
	if v := m.vals[i]; v != nil {
		return v
	}
	d := &m.defs[i]
	if d.shared != (unique.Handle[string]{}) {
		if sv, ok := m.inputs.sharedVariables.get(d.shared); ok {
			// Charged as if computed here: a policy's budget does not
			// depend on which policies ran before it.
			m.e.variablesCost += sv.cost
			m.vals[i] = sv.val
			return sv.val
		}
	}
	var v ref.Val
	var err error
	var cost int64
	if m.e.untracked && d.untracked != nil {
		// Within the variant's bound: its worst case is what another,
		// tracked, policy sharing the value is charged.
		v, _, err = d.untracked.Eval(m.e.act)
		cost = d.maxCost
		if err != nil {
			v = types.NewErr("composited variable %q fails to evaluate: %v", d.name, err)
		}
	} else {
		var details *celgo.EvalDetails
		v, details, err = d.program.Eval(m.e.act) // not ContextEval: see celEvaluator.eval
		switch {
		case details == nil || details.ActualCost() == nil:
			v = types.NewErr("unable to calculate cost of variable %q", d.name)
		case err != nil:
			v = types.NewErr("composited variable %q fails to evaluate: %v", d.name, err)
		}
		cost = actualCost(details)
	}
	m.e.variablesCost += cost
	m.vals[i] = v
	if d.shared != (unique.Handle[string]{}) && err == nil {
		m.inputs.sharedVariables.put(sharedVariable{key: d.shared, val: v, cost: cost})
	}
	return v
}

func (m *celVariables) Find(key ref.Val) (ref.Val, bool) {
	i, errVal := m.index(key)
	if errVal != nil {
		return errVal, true
	}
	if i < 0 {
		return nil, false
	}
	return m.value(i), true
}

func (m *celVariables) Get(key ref.Val) ref.Val {
	if v, found := m.Find(key); found {
		return v
	}
	return types.NewErr("no such key: %v", key)
}

func (m *celVariables) Contains(key ref.Val) ref.Val {
	i, errVal := m.index(key)
	if errVal != nil {
		return errVal
	}
	return types.Bool(i >= 0)
}

func (m *celVariables) IsSet(field ref.Val) ref.Val { return m.Contains(field) }

func (m *celVariables) Iterator() traits.Iterator {
	names := make([]string, len(m.defs))
	for i := range m.defs {
		names[i] = m.defs[i].name
	}
	return types.NewStringList(types.DefaultTypeAdapter, names).(traits.Lister).Iterator()
}

func (m *celVariables) Size() ref.Val { return types.Int(len(m.defs)) }

func (m *celVariables) ConvertToNative(reflect.Type) (any, error) {
	return nil, errors.New("variables have no native value")
}

func (m *celVariables) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return variablesType
	}
	return types.NewErr("variables cannot be converted to %s", t.TypeName())
}

func (m *celVariables) Equal(other ref.Val) ref.Val { return types.Bool(other == ref.Val(m)) }
func (m *celVariables) Type() ref.Type              { return variablesType }
func (m *celVariables) Value() any                  { return m }

// vpolMessage is Kyverno's failure message for a ValidatingPolicy: the
// messageExpression's value, else message, else the validation's index.
func (e *celEvaluator) vpolMessage(x *celExpression, i int) string {
	if x.messageExpr != nil {
		val, err := e.eval(x.messageExpr)
		if err != nil {
			return "failed to evaluate message expression: " + err.Error()
		}
		s, ok := val.(types.String)
		if !ok {
			return fmt.Sprintf("failed to convert message expression to string: %v", val)
		}
		return string(s)
	}
	if x.message != "" {
		return x.message
	}
	return fmt.Sprintf("CEL expression validation failed at index %d", i)
}
