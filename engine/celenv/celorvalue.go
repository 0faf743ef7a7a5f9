package celenv

import (
	celgo "github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Kyverno's policies rely on `x.orValue(y)` returning x when x is not an
// optional at all, e.g. `container.volumeMounts.orValue([])` on a list
// (kyverno/policies other-cel/ensure-readonly-hostpath): cel-go up to
// v0.26, which Kyverno and Kubernetes up to 1.35 build on, passed a
// non-optional left-hand side through; v0.29 makes it "no such overload".
// charter keeps the behaviour those policies were written and tested
// against. The checker still resolves orValue as usual; after checking, the
// overload of every orValue call is renamed to lenientOrValueID, which the
// optional library's own planner leaves alone and lenientOrValue
// implements.
const lenientOrValueID = "charter_lenient_orValue"

// WithLenientOrValue extends a CEL environment with the rewrite.
func WithLenientOrValue(env *environment.EnvSet) (*environment.EnvSet, error) {
	return env.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []celgo.EnvOption{
			celgo.ASTValidators(orValueRewrite{}),
			// The binding the planner finds by overload id; it evaluates
			// both sides, so decorateLenientOrValue replaces it with a
			// node that evaluates the right-hand side only when needed.
			celgo.Function("charterLenientOrValue",
				celgo.MemberOverload(lenientOrValueID, []*celgo.Type{celgo.DynType, celgo.DynType}, celgo.DynType,
					celgo.BinaryBinding(func(lhs, rhs ref.Val) ref.Val {
						if opt, ok := lhs.(*types.Optional); ok {
							if opt.HasValue() {
								return opt.GetValue()
							}
							return rhs
						}
						return lhs
					}))),
		},
		ProgramOptions: []celgo.ProgramOption{celgo.CustomDecoratorV2(decorateLenientOrValue)},
	})
}

// orValueRewrite renames the overload of orValue calls in a checked AST.
type orValueRewrite struct{}

func (orValueRewrite) Name() string { return "charter.lenientOrValue" }

func (orValueRewrite) Validate(_ *celgo.Env, _ celgo.ValidatorConfig, a *celast.AST, _ *celgo.Issues) {
	refs := a.ReferenceMap()
	celast.PreOrderVisit(a.Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() != celast.CallKind || e.AsCall().FunctionName() != "orValue" {
			return
		}
		if r := refs[e.ID()]; r != nil && len(r.OverloadIDs) == 1 && r.OverloadIDs[0] == "optional_orValue_value" {
			r.OverloadIDs = []string{lenientOrValueID}
		}
	}))
}

// decorateLenientOrValue plans the renamed calls as lenientOrValue nodes.
func decorateLenientOrValue(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok || call.OverloadID() != lenientOrValueID {
		return i, nil
	}
	args := call.Args()
	if len(args) != 2 {
		return i, nil
	}
	return &lenientOrValue{id: call.ID(), lhs: args[0], rhs: args[1]}, nil
}

// lenientOrValue is x.orValue(y): the value of a present optional x, y for
// an empty one, and x itself (errors included) when x is not an optional.
type lenientOrValue struct {
	id       int64
	lhs, rhs interpreter.InterpretableV2
}

func (o *lenientOrValue) ID() int64 { return o.id }

func (o *lenientOrValue) Eval(ctx interpreter.Activation) ref.Val {
	return o.Exec(interpreter.AsFrame(ctx))
}

func (o *lenientOrValue) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	v := o.lhs.Exec(frame)
	opt, ok := v.(*types.Optional)
	if !ok {
		return v
	}
	if opt.HasValue() {
		return opt.GetValue()
	}
	return o.rhs.Exec(frame)
}
