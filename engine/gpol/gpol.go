// Package gpol is the GeneratingPolicy kind (cel-policy-types.md §3.3.3):
// a compiled GeneratingPolicy or NamespacedGeneratingPolicy (Compile), its
// evaluation on a request into the objects it wants to exist
// (Policy.Generate), and the kinds it writes (GeneratedKinds). The
// engine's root compiles it into a PolicySet and files its one response.
package gpol

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	celgo "github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"google.golang.org/protobuf/types/known/structpb"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/review"
)

// Policy is a compiled GeneratingPolicy or
// NamespacedGeneratingPolicy (cel-policy-types.md §3.3.3): matchConstraints,
// exceptions, matchConditions, variables, then the generate expressions,
// whose generator.Apply calls collect the downstream objects. Its one rule
// response is named after the policy, as Kyverno names it, and is what the
// policy's synthetic generate rule (GeneratingPolicySpec.KyvernoSpec)
// answers to: UpdateRequests and the background controller handle it like
// a ClusterPolicy's generate rule.
type Policy struct {
	// name is the policy's name, which its rule response and the labels
	// of what it generates carry.
	name string
	// namespace is set for a NamespacedGeneratingPolicy: it acts on
	// triggers of its namespace only and generates into it only.
	namespace string
	match     *celruntime.Constraints
	// anyOperation is match for any operation: it tells whether the old
	// object of a DELETE or UPDATE was a trigger.
	anyOperation *celruntime.Constraints
	compiler     *celruntime.Compiler
	conditions   []celruntime.Program
	generations  []generation
	synchronize  bool
	orphan       bool
	// reapply is useServerSideApply: existing objects are applied again
	// on every run, without synchronize too.
	reapply bool
	// kinds are the "apiVersion/Kind" of the objects the expressions
	// write literally; with synchronize, generating any other kind is an
	// error, since charter could not find those objects again.
	kinds []string
	// annotations are the auditAnnotations, evaluated after the generate
	// entries into the result's properties.
	annotations []celruntime.Annotation
}

// generation is one generate entry: an expression (normally
// generator.Apply) or a template.
type generation struct {
	expr     *celruntime.Program
	template *gpolTemplate
}

// Generator is the receiver type of generator.Apply.
var generatorLibType = celgo.OpaqueType("charter.Generator")

const generatorVar = "generator"

// generatingPolicyEnv is the environment of a NamespacedGeneratingPolicy:
// that of policies.kyverno.io policies plus the generator receiver, whose
// Apply takes the namespace and the list, or the list alone (its own
// namespace). It parses every generating policy's expressions.
var generatingPolicyEnv = sync.OnceValues(func() (*environment.EnvSet, error) {
	return newGeneratingPolicyEnv(true)
})

// clusterGeneratingPolicyEnv is the environment of a GeneratingPolicy: its
// generator.Apply must name the namespace, as in Kyverno, so
// generator.Apply(list), which could only fail on every request, does
// not type-check and the policy is refused when it is written.
var clusterGeneratingPolicyEnv = sync.OnceValues(func() (*environment.EnvSet, error) {
	return newGeneratingPolicyEnv(false)
})

func newGeneratingPolicyEnv(namespaced bool) (*environment.EnvSet, error) {
	base, err := celruntime.PolicyEnv()
	if err != nil {
		return nil, err
	}
	list := celgo.ListType(celgo.DynType)
	overloads := []func(string) celgo.FunctionOpt{
		celenv.Member("generator_apply_ns", []*celgo.Type{generatorLibType, celgo.StringType, list}, celgo.BoolType, generatorApply),
	}
	if namespaced {
		overloads = append(overloads, celenv.Member("generator_apply_own_ns", []*celgo.Type{generatorLibType, list}, celgo.BoolType, generatorApplyOwnNamespace))
	}
	opts := []celgo.EnvOption{celgo.Variable(generatorVar, generatorLibType)}
	opts = append(opts, celenv.Method("Apply", overloads...)...)
	return base.Extend(environment.VersionedOptions{IntroducedVersion: version.MajorMinor(1, 0), EnvOptions: opts})
}

// generatingPolicyCompiler compiles the expressions of every
// NamespacedGeneratingPolicy, clusterGeneratingPolicyCompiler those of
// every GeneratingPolicy.
var (
	generatingPolicyCompiler = sync.OnceValues(func() (*celruntime.EnvCompiler, error) {
		env, err := generatingPolicyEnv()
		if err != nil {
			return nil, err
		}
		return celruntime.NewEnvCompiler(env, true)
	})
	clusterGeneratingPolicyCompiler = sync.OnceValues(func() (*celruntime.EnvCompiler, error) {
		env, err := clusterGeneratingPolicyEnv()
		if err != nil {
			return nil, err
		}
		return celruntime.NewEnvCompiler(env, true)
	})
)

// Compile compiles a GeneratingPolicy or
// NamespacedGeneratingPolicy known by key.
func Compile(src policiesv1.GeneratingPolicyLike, key string) (*Policy, fault.List) {
	spec := src.GetGeneratingPolicySpec()
	f := &fault.Collector{Kind: src.GetKind(), Name: key}
	gp := &Policy{name: src.GetName(), namespace: policyid.Namespace(src),
		synchronize: spec.SynchronizeEnabled(), orphan: spec.OrphanDownstreamOnPolicyDeleteEnabled(), reapply: spec.UseServerSideApply}
	compiler := clusterGeneratingPolicyCompiler
	if src.IsNamespaced() {
		compiler = generatingPolicyCompiler
	}
	envCompiler, err := compiler()
	if err == nil {
		gp.compiler = envCompiler.ForPolicy()
	}
	if err != nil {
		f.Add("spec", "CEL environment: "+err.Error())
		return nil, f.Errs
	}
	if gp.match, err = celruntime.CompileConstraints(spec.MatchConstraints); err != nil {
		f.Add("spec.matchConstraints", err.Error())
	} else {
		anyOp := spec.MatchConstraints.DeepCopy()
		for i := range anyOp.ResourceRules {
			anyOp.ResourceRules[i].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
		}
		gp.anyOperation, _ = celruntime.CompileConstraints(anyOp)
	}
	fields := celruntime.Fields{Compiler: gp.compiler, Faults: f}
	// matchConditions compile before the variables: they cannot use them,
	// as in Kyverno.
	gp.conditions = fields.Conditions(spec.MatchConditions, "spec.matchConditions")
	fields.Variables(spec.Variables, "spec.variables")
	var sources []string
	for _, v := range spec.Variables {
		if v.Name != "" {
			sources = append(sources, v.Expression)
		}
	}
	if len(spec.Generation) == 0 {
		f.Add("spec.generate", "a GeneratingPolicy needs at least one generate entry")
	}
	var templateKinds []string
	for i, g := range spec.Generation {
		field := fmt.Sprintf("spec.generate[%d]", i)
		switch {
		case g.Template != nil && g.Expression != "":
			f.Add(field, "exactly one of expression or template must be set")
		case g.Template != nil:
			// Placeholders are compiled with the policy: a bad one is
			// refused when the policy is applied.
			var placeholderFault string
			tmpl, err := compileTemplate(g.Template, func(expr string) *celruntime.Program {
				res := gp.compiler.CompileCELExpression(&celruntime.Accessor{Expr: expr, Returns: celruntime.AnyReturn()}, fields.Decls, environment.StoredExpressions)
				if res.Error != nil {
					if placeholderFault == "" {
						placeholderFault = celruntime.Fault(res.Error.Detail)
					}
					return nil
				}
				return &celruntime.Program{Expr: expr, Prog: res.Program}
			})
			switch {
			case err != nil && placeholderFault != "":
				f.Add(field+".template", err.Error()+": "+placeholderFault)
			case err != nil:
				f.Add(field+".template", err.Error())
			default:
				gp.generations = append(gp.generations, generation{template: tmpl})
				templateKinds = append(templateKinds, templateLiteralKinds(g.Template)...)
			}
		default:
			if prog := fields.Program(&celruntime.Accessor{Expr: g.Expression, Returns: celruntime.BoolReturn()}, field+".expression"); prog != nil {
				gp.generations = append(gp.generations, generation{expr: &celruntime.Program{Expr: g.Expression, Prog: prog}})
			}
			sources = append(sources, g.Expression)
		}
	}
	for i, a := range spec.AuditAnnotations {
		field := fmt.Sprintf("spec.auditAnnotations[%d]", i)
		if a.Key == "" {
			f.Add(field+".key", "an audit annotation needs a key")
		}
		// object is dyn in a GeneratingPolicy's environment: a string is
		// checked when the annotation is evaluated.
		if prog := fields.Program(&celruntime.Accessor{Expr: a.ValueExpression, Returns: []*celgo.Type{celgo.StringType, celgo.NullType, celgo.DynType}}, field+".valueExpression"); prog != nil {
			gp.annotations = append(gp.annotations, celruntime.Annotation{Key: a.Key, Program: celruntime.Program{Expr: a.ValueExpression, Prog: prog}})
		}
	}
	if len(f.Errs) > 0 {
		return nil, f.Errs
	}
	if env, err := generatingPolicyEnv(); err == nil {
		gp.kinds = literalKinds(env, sources, triggerKinds(spec.MatchConstraints))
	}
	for _, k := range templateKinds {
		if !slices.Contains(gp.kinds, k) {
			gp.kinds = append(gp.kinds, k)
		}
	}
	return gp, nil
}

// Generate evaluates a GeneratingPolicy for a request. A request whose
// new object the policy does not select, but whose old object it did
// (DELETE, or an UPDATE after which the object is no longer one of the
// policy's resources or no longer passes its matchConditions), fails with
// "trigger no longer matches", which tells a controller that a
// synchronized policy's downstream objects for that trigger must go. An
// UPDATE of a trigger that the policy selects for other operations only
// (resourceRules operations [CREATE]) gives no response: the trigger
// still matches. Under background checks (the UpdateRequest generator) a
// selected request passes without its generate expressions being
// evaluated. The one rule response, when ok; own is what the policy's
// owner hands over (its exceptions).
func (gp *Policy) Generate(ctx context.Context, req *review.Request, in *review.View, cfg *review.Options, own celruntime.Owner) (rr review.RuleResponse, ok bool) {
	rr = review.RuleResponse{Name: gp.name, Type: review.TypeGeneration}
	noLongerMatches := func() (review.RuleResponse, bool) {
		rr.Status, rr.Message = review.StatusFail, "trigger no longer matches"
		return rr, true
	}
	// old is the old object's view, built only when asked for.
	var oldView *review.View
	old := func() *review.View {
		if oldView == nil && req.OldObject != nil {
			oldReq := *req
			oldReq.Object = req.OldObject
			oldView = review.NewView(ctx, &oldReq, cfg)
		}
		return oldView
	}
	if req.Object == nil || !gp.match.Matches(in) {
		switch {
		case req.OldObject == nil || !review.InScope(gp.namespace, old().Scope):
			return rr, false
		case req.Object != nil && gp.anyOperation.Matches(in):
			// Still a trigger, of an operation the policy leaves alone.
			return rr, false
		case req.Object == nil && gp.match.Matches(old()):
			// A policy that asks for DELETE generates from the deleted
			// object.
			in = old()
		case gp.anyOperation.Matches(old()):
			return noLongerMatches()
		default:
			return rr, false
		}
	}
	e, act, gen := gp.evaluator(ctx, in, cfg)
	o := gp.evaluate(e, act, in, gen, cfg, own, &rr)
	if o == nil {
		// A matchCondition is false. When the old object of an UPDATE
		// passed them all, it was a trigger and is no longer one.
		if req.Object != nil && req.OldObject != nil && review.InScope(gp.namespace, old().Scope) && gp.anyOperation.Matches(old()) && gp.conditionsHold(ctx, old(), cfg) {
			return noLongerMatches()
		}
		return rr, false
	}
	rr.Status, rr.Message = o.Status, o.Message
	if len(o.Props) > 0 {
		rr.Properties = o.Props
	}
	if rr.Status == review.StatusPass && !cfg.BackgroundChecks {
		objs, err := gp.desired(in, gen.objects)
		if err != nil {
			rr.Status, rr.Message = review.StatusError, "failed to evaluate policy: "+err.Error()
		} else {
			rr.Generated = objs
		}
	}
	return rr, true
}

// evaluator returns the CEL evaluation state of the policy for a
// request view: its activation (object, request, variables, libraries)
// and the generator that collects what generator.Apply is given.
func (gp *Policy) evaluator(ctx context.Context, in *review.View, cfg *review.Options) (*celruntime.Evaluator, *activation, *generatorContext) {
	ci := celruntime.InputsOf(in)
	gen := &generatorContext{namespace: gp.namespace}
	act := &activation{
		PolicyActivation: celruntime.PolicyActivation{
			Activation: celruntime.Activation{In: ci, Object: ci.Object, OldObject: ci.OldObject, Request: ci.Request, Params: types.NullValue},
			Libs:       celruntime.NewLibReceivers(ctx, &cfg.Loaders, gp.namespace),
		},
		generator: gen,
	}
	cctx := gp.compiler.CreateContext(ctx)
	act.Variables = cctx.Variables(act)
	return &celruntime.Evaluator{Ctx: cctx, Act: act, Budget: celconfig.RuntimeCELCostBudget}, act, gen
}

// conditionsHold reports whether every matchCondition of the policy is
// true for a request view; one that errs does not hold.
func (gp *Policy) conditionsHold(ctx context.Context, in *review.View, cfg *review.Options) bool {
	e, _, _ := gp.evaluator(ctx, in, cfg)
	for i := range gp.conditions {
		if val, err := e.Eval(&gp.conditions[i]); err != nil || val != types.True {
			return false
		}
	}
	return true
}

// evaluate runs exceptions, matchConditions and the generate
// expressions; nil means the policy does not apply (a false
// matchCondition gives no response, as in Kyverno).
func (gp *Policy) evaluate(e *celruntime.Evaluator, act *activation, in *review.View, gen *generatorContext, cfg *review.Options, own celruntime.Owner, rr *review.RuleResponse) *review.Outcome {
	allowed, exempt, err := own.EvalExceptions(e, in.Scope, false)
	if err != nil {
		rr.Name = celruntime.RuleException
		o := review.Errorf("failed to evaluate exception: %v", err)
		return &o
	}
	if exempt != nil {
		rr.Name = celruntime.RuleException
		o := exempt.Outcome()
		return &o
	}
	act.Exceptions = allowed
	for i := range gp.conditions {
		val, err := e.Eval(&gp.conditions[i])
		if err != nil {
			o := review.Errorf("failed to evaluate policy: %v", err)
			return &o
		}
		if val != types.True {
			return nil
		}
	}
	if cfg.BackgroundChecks {
		o := review.Pass("policy evaluated successfully")
		return &o
	}
	for _, g := range gp.generations {
		var err error
		if g.template != nil {
			err = gen.applyTemplate(e, g.template)
		} else {
			_, err = e.Eval(g.expr)
		}
		if gen.err != nil {
			o := review.Errorf("failed to evaluate policy: failed to generate resources: %v", gen.err)
			return &o
		}
		if err != nil {
			o := review.Errorf("failed to evaluate policy: %v", err)
			return &o
		}
	}
	o := review.Pass("policy evaluated successfully")
	for i := range gp.annotations {
		a := &gp.annotations[i]
		val, err := e.Eval(&a.Program)
		if err != nil {
			o := review.Errorf("failed to evaluate policy: audit annotation %s: %v", a.Key, err)
			return &o
		}
		s, ok := val.(types.String)
		if !ok && val != types.NullValue {
			o := review.Errorf("failed to evaluate policy: audit annotation %s: a string or null, not %s", a.Key, val.Type().TypeName())
			return &o
		}
		if s != "" {
			if o.Props == nil {
				o.Props = map[string]string{}
			}
			o.Props[a.Key] = string(s)
		}
	}
	return &o
}

// desired turns the collected objects into downstream objects: the
// namespace generator.Apply named, server-set fields cleared, Kyverno's
// generate labels (the rule is the policy's name) for the trigger.
func (gp *Policy) desired(in *review.View, collected []appliedObject) ([]generate.DesiredObject, error) {
	policy := generate.PolicyRef{Name: gp.name, Namespace: gp.namespace}
	ref := in.ResourceRef()
	meta, _ := in.Object["metadata"].(map[string]any)
	uid, _ := meta["uid"].(string)
	trigger := generate.ObjectRef{APIVersion: ref.APIVersion, Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, UID: k8stypes.UID(uid)}
	out := make([]generate.DesiredObject, 0, len(collected))
	for i, a := range collected {
		obj := a.object
		apiVersion, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		om, _ := obj["metadata"].(map[string]any)
		name, _ := om["name"].(string)
		if apiVersion == "" || kind == "" || name == "" {
			return nil, fmt.Errorf("generated object %d has no apiVersion, kind or metadata.name", i)
		}
		if _, err := schema.ParseGroupVersion(apiVersion); err != nil {
			// Kyverno's reports/error-generating-resource: an error
			// result, not a write that fails and is retried.
			return nil, fmt.Errorf("generated object %d (%s %s): %w", i, kind, name, err)
		}
		if cluster, known := generate.KnownScope(apiVersion, kind); gp.namespace != "" && known && cluster {
			// The object goes where generator.Apply put it: a namespaced
			// policy's namespace, which a cluster-scoped object is in
			// none of.
			return nil, fmt.Errorf("generated object %d: %s %s is cluster-scoped: a namespaced policy generates only into its own namespace %s", i, kind, name, gp.namespace)
		}
		if gp.synchronize && !slices.Contains(gp.kinds, apiVersion+"/"+kind) {
			return nil, fmt.Errorf("%s %s: with synchronize, charter must find what a policy generated again; write the apiVersion and kind of every generated object literally in the policy (found: %s)",
				apiVersion, kind, strings.Join(gp.kinds, ", "))
		}
		if om == nil {
			om = map[string]any{}
			obj["metadata"] = om
		}
		// An object that came from the cluster (resource.get or
		// resource.list: it has a uid and a resourceVersion, which a
		// literal has no reason to carry) is a clone of it, as Kyverno
		// tells them apart: its source-uid label lets a controller
		// follow the source, which a synchronized policy's clone does
		// (changed, it is copied again; deleted, the clone goes).
		var source *generate.ObjectRef
		if srcUID, _ := om["uid"].(string); srcUID != "" && om["resourceVersion"] != nil {
			srcNamespace, _ := om["namespace"].(string)
			source = &generate.ObjectRef{APIVersion: apiVersion, Kind: kind, Namespace: srcNamespace, Name: name, UID: k8stypes.UID(srcUID)}
		}
		for _, k := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "selfLink", "deletionTimestamp"} {
			delete(om, k)
		}
		delete(obj, "status")
		if a.namespace != "" {
			if ns, _ := om["namespace"].(string); ns != a.namespace {
				// ownerReferences point into the namespace the object came
				// from.
				delete(om, "ownerReferences")
			}
			om["namespace"] = a.namespace
		} else {
			delete(om, "namespace")
		}
		labels, _ := om["labels"].(map[string]any)
		merged := make(map[string]any, len(labels)+10)
		for k, v := range labels {
			merged[k] = v
		}
		for k, v := range generate.DownstreamLabels(policy, gp.name, trigger) {
			merged[k] = v
		}
		from := generate.FromData
		if source != nil {
			from = generate.FromClone
			merged[generate.LabelSourceUID] = string(source.UID)
		}
		om["labels"] = merged
		out = append(out, generate.DesiredObject{
			Object: obj, Policy: policy, Rule: gp.name, Trigger: trigger, From: from, Source: source,
			Synchronize: gp.synchronize, OrphanDownstreamOnPolicyDelete: gp.orphan, Reapply: gp.reapply,
		})
	}
	return out, nil
}

// activation adds generator to a CEL policy's activation.
type activation struct {
	celruntime.PolicyActivation
	generator *generatorContext
}

func (a *activation) ResolveName(name string) (any, bool) {
	if name == generatorVar {
		return a.generator, true
	}
	return a.PolicyActivation.ResolveName(name)
}

// appliedObject is one object generator.Apply collected, with the
// namespace it goes to ("" for cluster-scoped objects).
type appliedObject struct {
	namespace string
	object    map[string]any
}

// generatorContext is the value of generator in one evaluation: it
// collects what Apply is given. A namespaced policy's generator writes
// into the policy's namespace only.
type generatorContext struct {
	namespace string
	objects   []appliedObject
	err       error
}

func (g *generatorContext) ConvertToNative(reflect.Type) (any, error) {
	return nil, errors.New("generator has no native value")
}
func (g *generatorContext) ConvertToType(ref.Type) ref.Val {
	return types.NewErr("generator cannot be converted")
}
func (g *generatorContext) Equal(o ref.Val) ref.Val { return types.Bool(o == ref.Val(g)) }
func (g *generatorContext) Type() ref.Type          { return generatorLibType }
func (g *generatorContext) Value() any              { return g }

func generatorApply(args ...ref.Val) ref.Val {
	g, ok := args[0].(*generatorContext)
	ns, ok2 := args[1].(types.String)
	if !ok || !ok2 {
		return types.MaybeNoSuchOverloadErr(args[0])
	}
	if g.namespace != "" && string(ns) != g.namespace {
		return g.fail(fmt.Errorf("cross-namespace generation denied: a namespaced policy generates into its own namespace %q only, not %q", g.namespace, ns))
	}
	return g.apply(string(ns), args[2])
}

func generatorApplyOwnNamespace(args ...ref.Val) ref.Val {
	g, ok := args[0].(*generatorContext)
	if !ok {
		return types.MaybeNoSuchOverloadErr(args[0])
	}
	if g.namespace == "" {
		return g.fail(errors.New("generator.Apply(list) is for namespaced policies; a cluster-wide policy names the namespace: generator.Apply(namespace, list)"))
	}
	return g.apply(g.namespace, args[1])
}

// applyTemplate renders a template and queues its documents, each into
// the namespace its metadata names (cel-policy-types.md §3.3.3). A
// namespaced policy's documents go to its own namespace; one that names
// another is refused.
func (g *generatorContext) applyTemplate(e *celruntime.Evaluator, t *gpolTemplate) error {
	docs, err := t.render(e)
	if err != nil {
		return err
	}
	for _, doc := range docs {
		meta, _ := doc["metadata"].(map[string]any)
		ns, _ := meta["namespace"].(string)
		if g.namespace != "" {
			if ns != "" && ns != g.namespace {
				g.fail(fmt.Errorf("cross-namespace generation denied: a namespaced policy generates into its own namespace %q only, not %q", g.namespace, ns))
				return nil
			}
			ns = g.namespace
		}
		g.objects = append(g.objects, appliedObject{namespace: ns, object: doc})
	}
	return nil
}

func (g *generatorContext) fail(err error) ref.Val {
	if g.err == nil {
		g.err = err
	}
	return types.NewErr("failed to generate resources: %v", err)
}

func (g *generatorContext) apply(namespace string, list ref.Val) ref.Val {
	native, err := list.ConvertToNative(reflect.TypeFor[*structpb.ListValue]())
	if err != nil {
		return g.fail(fmt.Errorf("objects: %w", err))
	}
	for i, item := range native.(*structpb.ListValue).AsSlice() {
		obj, ok := item.(map[string]any)
		if !ok {
			return g.fail(fmt.Errorf("object %d is a %T, not a map", i, item))
		}
		// A list (what resource.List returns) stands for its items, as
		// in Kyverno: generator.Apply(ns, [resource.List(...)]) clones
		// every object listed (its chainsaw test
		// generating-policies/clone/nosync/generate-secrets).
		items, isList := obj["items"]
		if !isList {
			g.objects = append(g.objects, appliedObject{namespace: namespace, object: obj})
			continue
		}
		list, ok := items.([]any)
		if !ok {
			return g.fail(fmt.Errorf("object %d: items is a %T, not a list", i, items))
		}
		for j, it := range list {
			o, ok := it.(map[string]any)
			if !ok {
				return g.fail(fmt.Errorf("object %d: item %d is a %T, not a map", i, j, it))
			}
			g.objects = append(g.objects, appliedObject{namespace: namespace, object: o})
		}
	}
	return types.True
}

// literalKinds returns the "apiVersion/Kind" of every map literal in the
// expressions with string-constant (or dyn(string-constant)) apiVersion
// and kind entries, and of every object a resource.get or resource.list
// call with a constant apiVersion and built-in resource reads: a clone
// generates the kind it read (Kyverno's clone tests:
// generator.Apply(ns, [resource.get("v1", "secrets", ...)])). A map
// literal whose apiVersion and kind are the trigger's (object.apiVersion,
// object.kind: a copy of the trigger made field by field, Kyverno's
// clone/sync/sync-modify-trigger) generates the trigger kinds given.
func literalKinds(env *environment.EnvSet, sources []string, triggers []string) []string {
	e, err := env.Env(environment.StoredExpressions)
	if err != nil {
		return nil
	}
	var out []string
	for _, src := range sources {
		parsed, iss := e.Parse(src)
		if iss.Err() != nil {
			continue
		}
		celast.PreOrderVisit(parsed.NativeRep().Expr(), celast.NewExprVisitor(func(x celast.Expr) {
			if k, ok := resourceLibraryKind(x); ok {
				if !slices.Contains(out, k) {
					out = append(out, k)
				}
				return
			}
			if x.Kind() != celast.MapKind {
				return
			}
			var apiVersion, kind string
			var triggerAPIVersion, triggerKind bool
			for _, ent := range x.AsMap().Entries() {
				me := ent.AsMapEntry()
				key, ok := constString(me.Key())
				if !ok {
					continue
				}
				switch {
				case key == "apiVersion" && isObjectField(me.Value(), "apiVersion"):
					triggerAPIVersion = true
				case key == "kind" && isObjectField(me.Value(), "kind"):
					triggerKind = true
				}
				val, ok := constString(me.Value())
				if !ok {
					continue
				}
				switch key {
				case "apiVersion":
					apiVersion = val
				case "kind":
					kind = val
				}
			}
			if triggerAPIVersion && triggerKind {
				for _, k := range triggers {
					if !slices.Contains(out, k) {
						out = append(out, k)
					}
				}
			}
			if apiVersion != "" && kind != "" && !slices.Contains(out, apiVersion+"/"+kind) {
				out = append(out, apiVersion+"/"+kind)
			}
		}))
	}
	return out
}

// resourceLibraryKind is the "apiVersion/Kind" of what a call
// resource.get(apiVersion, resource, ...) or resource.list(apiVersion,
// resource, ...) reads, when both are constants and the resource is
// built in.
func resourceLibraryKind(x celast.Expr) (string, bool) {
	if x.Kind() != celast.CallKind {
		return "", false
	}
	call := x.AsCall()
	if !call.IsMemberFunction() || !slices.Contains([]string{"get", "Get", "list", "List"}, call.FunctionName()) || len(call.Args()) < 2 {
		return "", false
	}
	if t := call.Target(); t.Kind() != celast.IdentKind || t.AsIdent() != "resource" {
		return "", false
	}
	apiVersion, ok := constString(call.Args()[0])
	if !ok {
		return "", false
	}
	res, ok := constString(call.Args()[1])
	if !ok {
		return "", false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return "", false
	}
	kind, ok := generate.KnownKindForResource(gv.Group, res, match.ResourceForKind)
	if !ok {
		return "", false
	}
	return apiVersion + "/" + kind, true
}

// isObjectField reports whether x is object.<field>, or dyn() of it.
func isObjectField(x celast.Expr, field string) bool {
	if x.Kind() == celast.CallKind && x.AsCall().FunctionName() == "dyn" && len(x.AsCall().Args()) == 1 {
		x = x.AsCall().Args()[0]
	}
	if x.Kind() != celast.SelectKind || x.AsSelect().FieldName() != field {
		return false
	}
	op := x.AsSelect().Operand()
	return op.Kind() == celast.IdentKind && op.AsIdent() == "object"
}

// triggerKinds are the "apiVersion/Kind" of the built-in resources the
// resource rules of mc name with a constant group, version and resource
// (no wildcards, no subresources).
func triggerKinds(mc *admissionregistrationv1.MatchResources) []string {
	if mc == nil {
		return nil
	}
	var out []string
	for _, r := range mc.ResourceRules {
		for _, g := range r.APIGroups {
			for _, v := range r.APIVersions {
				for _, res := range r.Resources {
					if g == "*" || v == "*" || strings.ContainsAny(res, "*/") {
						continue
					}
					kind, ok := generate.KnownKindForResource(g, res, match.ResourceForKind)
					if !ok {
						continue
					}
					apiVersion := v
					if g != "" {
						apiVersion = g + "/" + v
					}
					if k := apiVersion + "/" + kind; !slices.Contains(out, k) {
						out = append(out, k)
					}
				}
			}
		}
	}
	return out
}

// constString is a string literal, or dyn() of one.
func constString(x celast.Expr) (string, bool) {
	if x.Kind() == celast.CallKind && x.AsCall().FunctionName() == "dyn" && len(x.AsCall().Args()) == 1 {
		x = x.AsCall().Args()[0]
	}
	if x.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := x.AsLiteral().(types.String)
	return string(s), ok
}

// GeneratedKinds returns the kinds a generating policy writes
// ("networking.k8s.io/v1/NetworkPolicy", as kind selectors name them), for
// the controllers that watch and delete its downstream objects; nil for
// other policies.
func GeneratedKinds(p kyvernov1.PolicyInterface) []string {
	gp, ok := p.(policiesv1.GeneratingPolicyLike)
	if !ok {
		return nil
	}
	env, err := generatingPolicyEnv()
	if err != nil {
		return nil
	}
	spec := gp.GetGeneratingPolicySpec()
	var sources []string
	for _, v := range spec.Variables {
		sources = append(sources, v.Expression)
	}
	var templateKinds []string
	for _, g := range spec.Generation {
		if g.Template != nil {
			templateKinds = append(templateKinds, templateLiteralKinds(g.Template)...)
			continue
		}
		sources = append(sources, g.Expression)
	}
	out := literalKinds(env, sources, triggerKinds(spec.MatchConstraints))
	for _, k := range templateKinds {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}
