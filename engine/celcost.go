package engine

import (
	"math"
	"reflect"
	"sync"
	"unsafe"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/library"
)

// Runtime cost tracking, and when charter may leave it out.
//
// The Kubernetes base environment tracks the cost of every program it
// plans (cel.OptTrackCost) so that an expression stops at the per-call
// limit, and a policy at its budget: a safety limit charter keeps. The
// tracking costs: for the Pod Security set as ValidatingPolicies it was
// about a third of the CPU and more than half of the allocations of a
// review. Like Kubernetes, which refuses CRD rules whose static cost
// estimate is over the limit, charter asks cel-go's estimator for an
// expression's worst case. Policies read `object` as dyn, whose lists and
// strings have no declared bound, so the estimate is taken under an
// assumption charter checks per request: that no list, map or string in
// the request's inputs is longer than a bound S. A ValidatingPolicy
// variant whose every program stays within the per-call limit at S, and
// whose programs together stay within the budget, is evaluated without
// tracking for requests whose inputs are within S; for any other request,
// and for every variant that is not bounded, programs are tracked as
// before, and a runaway expression fails closed as before.

// untrackedBounds are the input bounds S tried for a variant, largest
// first: the largest at which it is bounded is kept.
var untrackedBounds = []int{4096, 2048, 1024, 512, 256, 128, 64}

// untrackedCost returns a cel.ProgramOption that turns cost tracking off
// for a program of an environment that turns it on: the Kubernetes base
// environment sets cel.EvalOptions(cel.OptTrackCost) for every program and
// cel-go has no option to unset an evaluation flag. It clears the flag on
// the program being planned, by the field cel-go keeps it in. It returns
// nil when that field is not there (a cel-go upgrade changed it): every
// program is then tracked, which TestUntrackedCostOption reports.
var untrackedCost = sync.OnceValue(func() celgo.ProgramOption {
	optType := reflect.TypeFor[celgo.ProgramOption]()
	if optType.NumIn() != 1 || optType.In(0).Kind() != reflect.Pointer || optType.NumOut() != 2 {
		return nil
	}
	field, ok := optType.In(0).Elem().FieldByName("evalOpts")
	if !ok || field.Type != reflect.TypeFor[celgo.EvalOption]() {
		return nil
	}
	noError := reflect.Zero(optType.Out(1))
	opt := reflect.MakeFunc(optType, func(args []reflect.Value) []reflect.Value {
		flags := (*celgo.EvalOption)(unsafe.Add(args[0].UnsafePointer(), field.Offset))
		*flags &^= celgo.OptTrackCost
		return []reflect.Value{args[0], noError}
	})
	return opt.Interface().(celgo.ProgramOption)
})

// sizeBounds are the sizes of an expression's values that the request's
// input bound S implies, by expression id, as multiples of S: a value
// with bound k has at most k·S elements (or characters), and everything
// it holds is within S. Values not in the map have no known bound.
type sizeBounds map[int64]uint64

// The request's inputs, which celInputs.inputSize measures, as bits of a
// set (1<<input).
const (
	inputObject = iota
	inputOldObject
	inputNamespace
	inputRequest
	inputCount
)

// inputVars are the variables whose values are the request's inputs.
var inputVars = map[string]int{
	plugincel.ObjectVarName: inputObject, plugincel.OldObjectVarName: inputOldObject,
	plugincel.NamespaceVarName: inputNamespace, plugincel.RequestVarName: inputRequest,
}

// boundSizes works out the size bounds of a checked expression's values:
// the inputs and everything read from them; lists built by concatenating
// bounded lists; literals; orValue, conditionals and dyn() of bounded
// values; loop variables over a bounded range; `variables.x` by vars
// (the bound of each earlier variable's value). Anything else, such as a
// function's result, has none. It returns the bound of the expression's
// value (0: none) and the inputs it reads (a set of 1<<input).
func boundSizes(a *celast.AST, vars map[string]uint64) (sizeBounds, uint64, uint8) {
	b := &boundWalk{ast: a, vars: vars, bounds: sizeBounds{}, scope: map[string][]uint64{}}
	k := b.walk(a.Expr())
	return b.bounds, k, b.reads
}

type boundWalk struct {
	ast    *celast.AST
	vars   map[string]uint64
	bounds sizeBounds
	reads  uint8
	// scope holds the bounds of the loop and accumulator variables in
	// scope, innermost last (0: none).
	scope map[string][]uint64
}

func (b *boundWalk) walk(e celast.Expr) uint64 {
	k := b.bound(e)
	if k > 0 {
		b.bounds[e.ID()] = k
	}
	return k
}

func (b *boundWalk) bound(e celast.Expr) uint64 {
	switch e.Kind() {
	case celast.LiteralKind:
		switch v := e.AsLiteral().(type) {
		case types.String:
			return literalBound(len(v))
		case types.Bytes:
			return literalBound(len(v))
		}
		return 1
	case celast.IdentKind:
		name := e.AsIdent()
		if s := b.scope[name]; len(s) > 0 {
			return s[len(s)-1]
		}
		if i, ok := inputVars[name]; ok {
			b.reads |= 1 << i
			return 1
		}
		return 0
	case celast.SelectKind:
		sel := e.AsSelect()
		op := b.walk(sel.Operand())
		if sel.IsTestOnly() {
			return 0
		}
		if op == 0 && sel.Operand().Kind() == celast.IdentKind && sel.Operand().AsIdent() == plugincel.VariableVarName && len(b.scope[plugincel.VariableVarName]) == 0 {
			return b.vars[sel.FieldName()]
		}
		return min(op, 1)
	case celast.ListKind:
		all := true
		for _, el := range e.AsList().Elements() {
			all = b.walk(el) == 1 && all
		}
		if !all {
			return 0
		}
		return literalBound(e.AsList().Size())
	case celast.MapKind:
		all := true
		for _, ent := range e.AsMap().Entries() {
			me := ent.AsMapEntry()
			all = b.walk(me.Key()) == 1 && all
			all = b.walk(me.Value()) == 1 && all
		}
		if !all {
			return 0
		}
		return literalBound(e.AsMap().Size())
	case celast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			b.walk(f.AsStructField().Value())
		}
		return 0
	case celast.ComprehensionKind:
		c := e.AsComprehension()
		elem := min(b.walk(c.IterRange()), 1)
		b.walk(c.AccuInit())
		b.push(c.AccuVar(), 0)
		b.push(c.IterVar(), elem)
		if c.HasIterVar2() {
			b.push(c.IterVar2(), elem)
		}
		b.walk(c.LoopCondition())
		b.walk(c.LoopStep())
		if c.HasIterVar2() {
			b.pop(c.IterVar2())
		}
		b.pop(c.IterVar())
		b.walk(c.Result())
		b.pop(c.AccuVar())
		return 0
	case celast.CallKind:
		return b.call(e.AsCall())
	}
	return 0
}

func (b *boundWalk) call(c celast.CallExpr) uint64 {
	var target uint64
	if c.IsMemberFunction() {
		target = b.walk(c.Target())
	}
	args := make([]uint64, len(c.Args()))
	for i, a := range c.Args() {
		args[i] = b.walk(a)
	}
	both := func(x, y uint64) uint64 {
		if x == 0 || y == 0 {
			return 0
		}
		return max(x, y)
	}
	switch c.FunctionName() {
	case operators.OptSelect, operators.Index, operators.OptIndex:
		// A value held by a bounded one.
		if len(args) > 0 {
			return min(args[0], 1)
		}
	case operators.Add:
		// Concatenation: the elements of both, within S each.
		if len(args) == 2 && args[0] > 0 && args[1] > 0 {
			return args[0] + args[1]
		}
	case operators.Conditional:
		if len(args) == 3 {
			return both(args[1], args[2])
		}
	case "orValue", "or":
		if c.IsMemberFunction() && len(args) == 1 {
			return both(target, args[0])
		}
	case "value":
		if c.IsMemberFunction() && len(args) == 0 {
			return target
		}
	case "dyn", "optional.of", "optional.ofNonZeroValue":
		if len(args) == 1 {
			return args[0]
		}
	case "optional.none":
		return 1
	}
	return 0
}

func (b *boundWalk) push(name string, k uint64) {
	if name != "" {
		b.scope[name] = append(b.scope[name], k)
	}
}

func (b *boundWalk) pop(name string) {
	if name != "" {
		b.scope[name] = b.scope[name][:len(b.scope[name])-1]
	}
}

// literalBound is the bound of a literal of n elements or characters:
// within every S tried when n is.
func literalBound(n int) uint64 {
	if n <= untrackedBounds[len(untrackedBounds)-1] {
		return 1
	}
	return 0
}

// boundedSizes is the cost estimator for one expression at one input
// bound S: Kubernetes' (its library functions' costs) with the sizes of
// sizeBounds.
type boundedSizes struct {
	library.CostEstimator
	bounds sizeBounds
	s      uint64
}

func newBoundedSizes(bounds sizeBounds, s int) *boundedSizes {
	e := &boundedSizes{bounds: bounds, s: uint64(s)}
	e.SizeEstimator = e
	return e
}

func (e *boundedSizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	// Kubernetes' estimator asks about nodes of its own making (the
	// items of a list), without an expression.
	x := n.Expr()
	if x == nil {
		return nil
	}
	k, ok := e.bounds[x.ID()]
	if !ok {
		return nil
	}
	size := uint64(math.MaxUint64)
	if k <= math.MaxUint64/e.s {
		size = k * e.s
	}
	return &checker.SizeEstimate{Max: size}
}

// estimateMaxCost is the worst-case cost of a checked expression when the
// request's inputs are within s.
func estimateMaxCost(env *celgo.Env, a *celgo.Ast, bounds sizeBounds, s int) uint64 {
	est, err := env.EstimateCost(a, newBoundedSizes(bounds, s))
	if err != nil {
		return math.MaxUint64
	}
	return est.Max
}

// withinLimits reports whether programs whose worst cases are costs may
// run untracked: each within the per-call limit, all within the budget.
func withinLimits(costs []uint64) bool {
	var total uint64
	for _, c := range costs {
		if c > celconfig.PerCallLimit {
			return false
		}
		total += c
	}
	return total <= uint64(celconfig.RuntimeCELCostBudget)
}

// maxValueSize returns the size of the longest list, map or string in v
// (an unstructured value), or more than limit as soon as one is longer
// than limit or v holds a value of another type.
func maxValueSize(v any, limit int) int {
	switch x := v.(type) {
	case nil, bool, float64, int64, int, int32, float32:
		return 0
	case string:
		return len(x)
	case map[string]any:
		most := len(x)
		for k, val := range x {
			most = max(most, len(k), maxValueSize(val, limit))
			if most > limit {
				return most
			}
		}
		return most
	case []any:
		most := len(x)
		for _, val := range x {
			most = max(most, maxValueSize(val, limit))
			if most > limit {
				return most
			}
		}
		return most
	}
	return limit + 1
}
