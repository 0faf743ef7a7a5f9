package celruntime

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/util/version"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	apiservercelcommon "k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/lazy"
	"k8s.io/apiserver/pkg/cel/library"
	"k8s.io/apiserver/pkg/cel/mutation"

	"github.com/charter-dev/charter/engine/celenv"
)

// variablesTypeName is the CEL type of `variables`, as VAP names it.
const variablesTypeName = "kubernetes.variables"

// EnvCompiler compiles the expressions of every policy of one CEL
// environment. VAP's plugincel.NewCompositedCompiler gives each policy its
// own copy of the environment, because the type of `variables` carries the
// policy's variables: sixteen extended environments per policy, over a MiB
// each, built and type-checked apart (most of the CLI's heap over the
// corpus's CEL suites). Here the environments are built once: an
// expression that can see no variable compiles in one where `variables`
// has no field, concurrently; one that can compiles, one at a time, in one
// whose `variables` type is given the policy's fields for that
// compilation. A compiled program does not refer back to those fields: at
// evaluation each policy's variables are its own lazy map.
type EnvCompiler struct {
	plain plugincel.Compiler

	mu       sync.Mutex
	vars     *apiservercel.DeclType // withVars's `variables`; Fields are those of the policy holding mu
	withVars plugincel.Compiler

	// plainEnv and withVarsEnv are the environments plain and withVars
	// extend with the request's variables; checked extends them as
	// plugincel does, for compileChecked.
	plainEnv, withVarsEnv *environment.EnvSet
	checked               func() (checkedEnvs, error)

	// requestObjects is set for the policies.kyverno.io kinds, whose
	// `request` holds the objects too (cel-policy-types.md §3.1):
	// `request.object` and `request.oldObject`, as Kyverno declares them.
	// Every expression then compiles through compileChecked, since
	// plugincel's compiler declares VAP's request type of its own.
	requestObjects bool
}

// checkedEnvs are the environments of compileChecked, without and with
// the policy's variables.
type checkedEnvs struct{ plain, withVars, plainPatch, withVarsPatch *environment.EnvSet }

// NewEnvCompiler builds the compiler of an environment; requestObjects
// declares request.object and request.oldObject, as Kyverno's CEL
// policies read them.
func NewEnvCompiler(base *environment.EnvSet, requestObjects bool) (*EnvCompiler, error) {
	c := &EnvCompiler{requestObjects: requestObjects}
	for _, into := range []struct {
		compiler *plugincel.Compiler
		vars     **apiservercel.DeclType
	}{{&c.plain, nil}, {&c.withVars, &c.vars}} {
		vars := apiservercel.NewObjectType(variablesTypeName, map[string]*apiservercel.DeclField{})
		env, err := base.Extend(environment.VersionedOptions{
			IntroducedVersion: version.MajorMinor(1, 0),
			EnvOptions:        []celgo.EnvOption{celgo.Variable("variables", vars.CelType())},
			DeclTypes:         []*apiservercel.DeclType{vars},
		})
		if err != nil {
			return nil, err
		}
		*into.compiler = plugincel.NewCompiler(env)
		if into.vars != nil {
			*into.vars = vars
			c.withVarsEnv = env
		} else {
			c.plainEnv = env
		}
	}
	c.checked = sync.OnceValues(func() (envs checkedEnvs, err error) {
		if envs.plain, err = withRequestVariables(c.plainEnv, requestObjects); err != nil {
			return envs, err
		}
		if envs.withVars, err = withRequestVariables(c.withVarsEnv, requestObjects); err != nil {
			return envs, err
		}
		if envs.plainPatch, err = envs.plain.Extend(patchTypes); err != nil {
			return envs, err
		}
		envs.withVarsPatch, err = envs.withVars.Extend(patchTypes)
		return envs, err
	})
	return c, nil
}

// withRequestVariables declares the variables plugincel's compiler
// declares for an expression without params or authorizer: object,
// oldObject, namespaceObject and request, with Kubernetes' own types;
// with requestObjects, request also has the fields object and oldObject
// (dyn), as in Kyverno's CEL policies.
func withRequestVariables(env *environment.EnvSet, requestObjects bool) (*environment.EnvSet, error) {
	namespaceType, requestType := plugincel.BuildNamespaceType(), plugincel.BuildRequestType()
	if requestObjects {
		for _, name := range []string{plugincel.ObjectVarName, plugincel.OldObjectVarName} {
			requestType.Fields[name] = apiservercel.NewDeclField(name, apiservercel.DynType, false, nil, nil)
		}
	}
	return env.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []celgo.EnvOption{
			celgo.Variable(plugincel.ObjectVarName, celgo.DynType),
			celgo.Variable(plugincel.OldObjectVarName, celgo.DynType),
			celgo.Variable(plugincel.NamespaceVarName, namespaceType.CelType()),
			celgo.Variable(plugincel.RequestVarName, requestType.CelType()),
		},
		DeclTypes: []*apiservercel.DeclType{namespaceType, requestType},
	}, environment.StrictCostOpt)
}

// patchTypes are what plugincel declares for a MutatingAdmissionPolicy's
// mutations (its HasPatchTypes): the JSONPatch and Object types, and
// jsonpatch.escapeKey.
var patchTypes = environment.VersionedOptions{
	IntroducedVersion: version.MajorMinor(1, 0),
	EnvOptions: []celgo.EnvOption{
		apiservercelcommon.ResolverEnvOption(&mutation.DynamicTypeResolver{}),
		environment.UnversionedLib(library.JSONPatch),
	},
}

// CheckedExpression is an expression compiled by compileChecked.
type CheckedExpression struct {
	plugincel.CompilationResult
	// ast and env are the checked expression and its environment, for
	// its cost estimates (celenv.BoundSizes, celenv.EstimateMaxCost).
	AST *celgo.Ast
	Env *celgo.Env
	// untracked is the program without runtime cost tracking (see
	// celenv.UntrackedCost); nil when it could not be planned.
	Untracked celgo.Program
}

// CompileChecked compiles an expression without params or authorizer as
// CompileCELExpression does, keeping the checked expression, and plans it
// a second time without cost tracking. Unlike plugincel's, the program is
// planned without interrupt checks, which only a cancelled context
// triggers: charter evaluates with Eval (celEvaluator.eval).
func (c *Compiler) CompileChecked(a plugincel.ExpressionAccessor, mode environment.Type) CheckedExpression {
	return c.compileTyped(a, mode, true, false)
}

// compileTyped is compileChecked; untracked also plans the program
// without cost tracking, patchTypes declares the mutations' types.
func (c *Compiler) compileTyped(a plugincel.ExpressionAccessor, mode environment.Type, untracked, patchTypes bool) CheckedExpression {
	fail := func(typ apiservercel.ErrorType, detail string, cause error) CheckedExpression {
		return CheckedExpression{CompilationResult: plugincel.CompilationResult{
			Error: &apiservercel.Error{Type: typ, Detail: detail, Cause: cause}, ExpressionAccessor: a,
		}}
	}
	envs, err := c.env.checked()
	if err != nil {
		return fail(apiservercel.ErrorTypeInternal, "unexpected error loading CEL environment: "+err.Error(), nil)
	}
	envSet := envs.plain
	if patchTypes {
		envSet = envs.plainPatch
	}
	if len(c.vars.Fields) > 0 {
		c.env.mu.Lock()
		defer c.env.mu.Unlock()
		c.env.vars.Fields = c.vars.Fields
		envSet = envs.withVars
		if patchTypes {
			envSet = envs.withVarsPatch
		}
	}
	env, err := envSet.Env(mode)
	if err != nil {
		return fail(apiservercel.ErrorTypeInternal, "unexpected error loading CEL environment: "+err.Error(), nil)
	}
	ast, issues := env.Compile(a.GetExpression())
	if issues != nil {
		return fail(apiservercel.ErrorTypeInvalid, "compilation failed: "+issues.String(), apiservercel.NewCompilationError(issues))
	}
	returns := a.ReturnTypes()
	if !slices.ContainsFunc(returns, func(t *celgo.Type) bool {
		return ast.OutputType().IsExactType(t) || celgo.AnyType.IsExactType(t)
	}) {
		if len(returns) == 1 {
			return fail(apiservercel.ErrorTypeInvalid, fmt.Sprintf("must evaluate to %v but got %v", returns[0], ast.OutputType()), nil)
		}
		return fail(apiservercel.ErrorTypeInvalid, fmt.Sprintf("must evaluate to one of %v but got %v", returns, ast.OutputType()), nil)
	}
	prog, err := env.Program(ast)
	if err != nil {
		return fail(apiservercel.ErrorTypeInternal, "program instantiation failed: "+err.Error(), nil)
	}
	out := CheckedExpression{CompilationResult: plugincel.CompilationResult{Program: prog, ExpressionAccessor: a, OutputType: ast.OutputType()}, AST: ast}
	// Estimates read only the checked expression and the cost options,
	// which the plain environment has too, without the shared variables
	// type another policy may be changing.
	if out.Env, err = envs.plain.Env(mode); err != nil {
		out.Env = nil
	}
	if opt := celenv.UntrackedCost(); opt != nil && untracked {
		out.Untracked, _ = env.Program(ast, opt)
	}
	return out
}

// CompileAndStoreChecked is CompileAndStoreVariable through
// compileChecked.
func (c *Compiler) CompileAndStoreChecked(v plugincel.NamedExpressionAccessor, mode environment.Type) CheckedExpression {
	res := c.CompileChecked(v, mode)
	c.vars.Fields[v.GetName()] = apiservercel.NewDeclField(v.GetName(), declTypeOf(res.OutputType), true, nil, nil)
	c.compiled[v.GetName()] = res.CompilationResult
	return res
}

// ForPolicy returns a compiler for one policy's expressions and variables.
func (c *EnvCompiler) ForPolicy() *Compiler {
	return &Compiler{env: c, vars: apiservercel.NewObjectType(variablesTypeName, map[string]*apiservercel.DeclField{}), compiled: map[string]plugincel.CompilationResult{}}
}

// Compiler compiles one policy's expressions, which see the variables
// stored before them, as plugincel.CompositedCompiler does.
type Compiler struct {
	env      *EnvCompiler
	vars     *apiservercel.DeclType // the policy's variables so far
	compiled map[string]plugincel.CompilationResult
}

// CompileCELExpression compiles an expression that may use the variables
// stored so far.
func (c *Compiler) CompileCELExpression(a plugincel.ExpressionAccessor, decls plugincel.OptionalVariableDeclarations, mode environment.Type) plugincel.CompilationResult {
	if c.env.requestObjects && !decls.HasParams && !decls.HasAuthorizer {
		return c.compileTyped(a, mode, false, decls.HasPatchTypes).CompilationResult
	}
	if len(c.vars.Fields) == 0 {
		return c.env.plain.CompileCELExpression(a, decls, mode)
	}
	c.env.mu.Lock()
	defer c.env.mu.Unlock()
	c.env.vars.Fields = c.vars.Fields
	return c.env.withVars.CompileCELExpression(a, decls, mode)
}

// CompileAndStoreVariable compiles a variable and stores it, compiled or
// not, so that later expressions may name it (a broken one evaluates to
// an error).
func (c *Compiler) CompileAndStoreVariable(v plugincel.NamedExpressionAccessor, decls plugincel.OptionalVariableDeclarations, mode environment.Type) plugincel.CompilationResult {
	res := c.CompileCELExpression(v, decls, mode)
	c.vars.Fields[v.GetName()] = apiservercel.NewDeclField(v.GetName(), declTypeOf(res.OutputType), true, nil, nil)
	c.compiled[v.GetName()] = res
	return res
}

// CreateContext starts one evaluation: variables are evaluated at most
// once, when first used, and charge their cost to the context.
func (c *Compiler) CreateContext(parent context.Context) plugincel.CompositionContext {
	return &celComposition{Context: parent, compiler: c}
}

// declTypeOf is the declared type of a variable whose expression has the
// CEL type t: scalars and lists and maps of them keep their type, anything
// else (objects, a variable that did not compile) is dyn.
func declTypeOf(t *celgo.Type) *apiservercel.DeclType {
	if t == nil {
		return apiservercel.DynType
	}
	for _, s := range []struct {
		cel  *celgo.Type
		decl *apiservercel.DeclType
	}{
		{celgo.AnyType, apiservercel.AnyType}, {celgo.BoolType, apiservercel.BoolType},
		{celgo.BytesType, apiservercel.BytesType}, {celgo.DoubleType, apiservercel.DoubleType},
		{celgo.DurationType, apiservercel.DurationType}, {celgo.IntType, apiservercel.IntType},
		{celgo.NullType, apiservercel.NullType}, {celgo.StringType, apiservercel.StringType},
		{celgo.TimestampType, apiservercel.TimestampType}, {celgo.UintType, apiservercel.UintType},
	} {
		if t == s.cel {
			return s.decl
		}
	}
	if t.HasTrait(traits.ContainerType) && t.HasTrait(traits.IndexerType) {
		switch p := t.Parameters(); len(p) {
		case 1:
			return apiservercel.NewListType(declTypeOf(p[0]), -1)
		case 2:
			return apiservercel.NewMapType(declTypeOf(p[0]), declTypeOf(p[1]), -1)
		}
	}
	return apiservercel.DynType
}

// celComposition is one evaluation's plugincel.CompositionContext.
type celComposition struct {
	context.Context
	compiler *Compiler
	cost     int64
}

// Variables binds the policy's variables for the activation, each
// evaluated on first use.
func (e *celComposition) Variables(activation any) ref.Val {
	m := lazy.NewMapValue(e.compiler.vars)
	for name, res := range e.compiler.compiled {
		m.Append(name, func(*lazy.MapValue) ref.Val { return e.variable(name, res, activation) })
	}
	return m
}

func (e *celComposition) variable(name string, res plugincel.CompilationResult, activation any) ref.Val {
	if res.Error != nil {
		return types.NewErr("composited variable %q fails to compile: %v", name, res.Error)
	}
	v, details, err := res.Program.Eval(activation) // not ContextEval: see celEvaluator.eval
	if details == nil {
		return types.NewErr("unable to get evaluation details of variable %q", name)
	}
	if details.ActualCost() == nil {
		return types.NewErr("unable to calculate cost of variable %q", name)
	}
	e.cost += int64(min(*details.ActualCost(), math.MaxInt64))
	if err != nil {
		return types.NewErr("composited variable %q fails to evaluate: %v", name, err)
	}
	return v
}

// GetAndResetCost returns the cost charged by the variables evaluated
// since the last call.
func (e *celComposition) GetAndResetCost() int64 {
	cost := e.cost
	e.cost = 0
	return cost
}
