package celenv

import (
	"math"
	"reflect"
	"slices"
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
// assumption charter checks per request: that no string in the request's
// inputs is longer than a bound B.Strings, and no list or map has more
// than B.Lists entries. Strings and lists have separate bounds because
// real objects have long strings (image references with digests, long
// annotations, script arguments) and short lists, and most expressions'
// costs grow with one and not the other. A ValidatingPolicy variant whose
// every program stays within the per-call limit at B, and whose programs
// together stay within the budget, is evaluated without tracking for
// requests whose inputs are within B; for any other request, and for
// every variant that is not bounded, programs are tracked as before, and
// a runaway expression fails closed as before.

// InputBound is a bound on a request's inputs: the longest string and the
// largest list or map. The zero bound holds no request.
type InputBound struct {
	Strings, Lists int
}

// Holds reports whether inputs of the sizes s are within b.
func (b InputBound) Holds(s InputBound) bool {
	return b.Strings > 0 && s.Strings <= b.Strings && s.Lists <= b.Lists
}

// stringBounds and listBounds are the bounds tried for a variant, largest
// first: of the pairs at which it is bounded, the one with the largest
// product is kept (boundVariant).
var (
	stringBounds = []int{65536, 32768, 16384, 8192, 4096, 2048, 1024}
	listBounds   = []int{4096, 2048, 1024, 512, 256, 128, 64}
	// LargestBound is what a request is measured against: an input past
	// it runs every variant tracked.
	LargestBound = InputBound{Strings: stringBounds[0], Lists: listBounds[0]}
	// smallestBound is the smallest bound tried, and the size a literal
	// must be within to count as bounded.
	smallestBound = InputBound{Strings: stringBounds[len(stringBounds)-1], Lists: listBounds[len(listBounds)-1]}
)

// LargestBounded returns, of the bounds tried, the one with the largest
// product (the larger string bound on a tie) at which bounded holds, or
// the zero bound when it holds at none. Costs grow with both bounds, so it
// walks the frontier of the pairs that hold, from the largest string
// bound down, trying the largest list bound first: a variant bounded at
// the largest pair takes one estimate, one bounded at no pair two, one
// that only one of the bounds limits at most 12, any other at most
// 2·|stringBounds|+|listBounds|+2 (TestLargestBounded), each asked once.
func LargestBounded(bounded func(InputBound) bool) InputBound {
	asked := map[InputBound]bool{}
	holds := func(b InputBound) bool {
		ok, seen := asked[b]
		if !seen {
			ok = bounded(b)
			asked[b] = ok
		}
		return ok
	}
	if holds(LargestBound) {
		return LargestBound
	}
	if !holds(smallestBound) {
		return InputBound{}
	}
	best := smallestBound
	// listBounds[j] holds with the current string bound once found: a
	// smaller string bound holds with it too.
	j, found := len(listBounds)-1, false
	for _, str := range stringBounds {
		if str*listBounds[0] <= best.Strings*best.Lists {
			break // no smaller string bound can do better
		}
		if !found && !holds(InputBound{Strings: str, Lists: listBounds[j]}) {
			continue
		}
		found = true
		if j > 0 && holds(InputBound{Strings: str, Lists: listBounds[0]}) {
			j = 0
		}
		for j > 0 && holds(InputBound{Strings: str, Lists: listBounds[j-1]}) {
			j--
		}
		if b := (InputBound{Strings: str, Lists: listBounds[j]}); b.Strings*b.Lists > best.Strings*best.Lists {
			best = b
		}
	}
	return best
}

// UntrackedCost returns a cel.ProgramOption that turns cost tracking off
// for a program of an environment that turns it on: the Kubernetes base
// environment sets cel.EvalOptions(cel.OptTrackCost) for every program and
// cel-go has no option to unset an evaluation flag. It clears the flag on
// the program being planned, by the field cel-go keeps it in. It returns
// nil when that field is not there (a cel-go upgrade changed it): every
// program is then tracked, which TestUntrackedCostOption reports.
var UntrackedCost = sync.OnceValue(func() celgo.ProgramOption {
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

// SizeBounds are the sizes of an expression's values that the request's
// input bound B implies, by expression id. Values not in sizes have no
// known bound. Each value's use says which of B's two bounds its size
// can be (sizeUse).
//
// unpriced corrects cel-go's estimate, which prices a field selection
// only on a map, message or type parameter, never on a dyn value (CRD
// rules, its other user, have no dyn): at runtime each costs 1. It holds
// one entry per such selection: the sizes of the ranges of the loops it
// runs in, whose product bounds how often it runs.
type SizeBounds struct {
	sizes    map[int64]sizeBound
	unpriced [][]valueBound
}

type sizeBound struct {
	size valueBound
	use  sizeUse
}

// valueBound bounds a value's size at k·B+n: k·B.Strings+n characters
// when it is a string, k·B.Lists+n entries when it is a list or map (n
// counts what literals add). Unknown: no bound.
type valueBound struct {
	k, n  uint64
	known bool
}

var (
	unknownSize = valueBound{}
	// withinB is the bound of an input and of everything it holds.
	withinB = valueBound{k: 1, known: true}
)

func literalSize(n int) valueBound { return valueBound{n: uint64(n), known: true} }

// or bounds either of two values.
func (v valueBound) or(w valueBound) valueBound {
	if !v.known || !w.known {
		return unknownSize
	}
	return valueBound{k: max(v.k, w.k), n: max(v.n, w.n), known: true}
}

// plus bounds the concatenation of two values.
func (v valueBound) plus(w valueBound) valueBound {
	if !v.known || !w.known {
		return unknownSize
	}
	return valueBound{k: v.k + w.k, n: v.n + w.n, known: true}
}

// ValueBounds is a value's own bound and the bound of everything it holds, at
// any depth.
type ValueBounds struct {
	self, held valueBound
}

// scalarBounds is the bounds of a value that holds nothing.
func scalarBounds(v valueBound) ValueBounds { return ValueBounds{self: v, held: literalSize(0)} }

var (
	noBounds    = ValueBounds{}
	inputBounds = ValueBounds{self: withinB, held: withinB}
)

// sizeUse is what the expression that reads a value's size can take it
// as: a dyn value read from an input may be a string or a list, but one
// iterated over, or passed where every overload the checker chose takes a
// list or map, is charged as a list (a string there errs), and one passed
// where every overload takes a string is charged as a string.
type sizeUse uint8

const (
	useEither sizeUse = iota
	useString
	useList
)

// The request's inputs, which celInputs.inputSizes measures, as bits of a
// set (1<<input).
const (
	InputObject = iota
	InputOldObject
	InputNamespace
	inputRequest
	InputCount
)

// inputVars are the variables whose values are the request's inputs.
var inputVars = map[string]int{
	plugincel.ObjectVarName: InputObject, plugincel.OldObjectVarName: InputOldObject,
	plugincel.NamespaceVarName: InputNamespace, plugincel.RequestVarName: inputRequest,
}

// BoundSizes works out the size bounds of a checked expression's values:
// the inputs and everything read from them; lists built by concatenating
// bounded lists; literals; orValue, conditionals and dyn() of bounded
// values; loop variables over a bounded range; `variables.x` by vars
// (the bounds of each earlier variable's value). Anything else, such as a
// function's result, has none. It returns the bounds of the expression's
// value and the inputs it reads (a set of 1<<input). env is the
// environment it was checked in, whose overloads say how a call's
// arguments are used.
func BoundSizes(env *celgo.Env, a *celast.AST, vars map[string]ValueBounds) (SizeBounds, ValueBounds, uint8) {
	b := &boundWalk{env: env, ast: a, vars: vars, bounds: SizeBounds{sizes: map[int64]sizeBound{}}, scope: map[string][]ValueBounds{}}
	k := b.walk(a.Expr())
	return b.bounds, k, b.reads
}

type boundWalk struct {
	env    *celgo.Env
	ast    *celast.AST
	vars   map[string]ValueBounds
	bounds SizeBounds
	reads  uint8
	// scope holds the bounds of the loop and accumulator variables in
	// scope, innermost last.
	scope map[string][]ValueBounds
	// loops are the sizes of the ranges of the loops being walked,
	// outermost first.
	loops []valueBound
}

func (b *boundWalk) walk(e celast.Expr) ValueBounds {
	k := b.bound(e)
	if k.self.known {
		b.bounds.sizes[e.ID()] = sizeBound{size: k.self}
	}
	return k
}

// used records how a bounded value is used (sizeUse).
func (b *boundWalk) used(e celast.Expr, use sizeUse) {
	if sb, ok := b.bounds.sizes[e.ID()]; ok {
		sb.use = use
		b.bounds.sizes[e.ID()] = sb
	}
}

// literalBounds is the bounds of a literal list or map of elements with bounds
// els.
func literalBounds(n int, els ...ValueBounds) ValueBounds {
	held := literalSize(0)
	for _, el := range els {
		held = held.or(el.self).or(el.held)
	}
	if !held.known {
		return noBounds
	}
	return ValueBounds{self: literalSize(n), held: held}
}

// heldBounds is the bounds of a value held by one with bounds v.
func heldBounds(v ValueBounds) ValueBounds {
	return ValueBounds{self: v.held, held: v.held}
}

// eitherBounds is the bounds of one of two values.
func eitherBounds(v, w ValueBounds) ValueBounds {
	r := ValueBounds{self: v.self.or(w.self), held: v.held.or(w.held)}
	if !r.self.known || !r.held.known {
		return noBounds
	}
	return r
}

func (b *boundWalk) bound(e celast.Expr) ValueBounds {
	switch e.Kind() {
	case celast.LiteralKind:
		switch v := e.AsLiteral().(type) {
		case types.String:
			return scalarBounds(literalSize(len(v)))
		case types.Bytes:
			return scalarBounds(literalSize(len(v)))
		}
		return scalarBounds(literalSize(1))
	case celast.IdentKind:
		name := e.AsIdent()
		if s := b.scope[name]; len(s) > 0 {
			return s[len(s)-1]
		}
		if i, ok := inputVars[name]; ok {
			b.reads |= 1 << i
			return inputBounds
		}
		return noBounds
	case celast.SelectKind:
		sel := e.AsSelect()
		op := b.walk(sel.Operand())
		if sel.IsTestOnly() {
			return noBounds
		}
		switch b.ast.GetType(sel.Operand().ID()).Kind() {
		case types.MapKind, types.StructKind, types.TypeParamKind:
		default:
			b.bounds.unpriced = append(b.bounds.unpriced, slices.Clone(b.loops))
		}
		if !op.self.known && sel.Operand().Kind() == celast.IdentKind && sel.Operand().AsIdent() == plugincel.VariableVarName && len(b.scope[plugincel.VariableVarName]) == 0 {
			return b.vars[sel.FieldName()]
		}
		return heldBounds(op)
	case celast.ListKind:
		els := make([]ValueBounds, 0, e.AsList().Size())
		for _, el := range e.AsList().Elements() {
			els = append(els, b.walk(el))
		}
		return literalBounds(e.AsList().Size(), els...)
	case celast.MapKind:
		els := make([]ValueBounds, 0, 2*e.AsMap().Size())
		for _, ent := range e.AsMap().Entries() {
			me := ent.AsMapEntry()
			els = append(els, b.walk(me.Key()), b.walk(me.Value()))
		}
		return literalBounds(e.AsMap().Size(), els...)
	case celast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			b.walk(f.AsStructField().Value())
		}
		return noBounds
	case celast.ComprehensionKind:
		c := e.AsComprehension()
		rng := b.walk(c.IterRange())
		b.used(c.IterRange(), useList)
		elem := heldBounds(rng)
		b.walk(c.AccuInit())
		b.push(c.AccuVar(), noBounds)
		b.push(c.IterVar(), elem)
		if c.HasIterVar2() {
			b.push(c.IterVar2(), elem)
		}
		b.loops = append(b.loops, rng.self)
		b.walk(c.LoopCondition())
		b.walk(c.LoopStep())
		b.loops = b.loops[:len(b.loops)-1]
		if c.HasIterVar2() {
			b.pop(c.IterVar2())
		}
		b.pop(c.IterVar())
		b.walk(c.Result())
		b.pop(c.AccuVar())
		return noBounds
	case celast.CallKind:
		return b.call(e)
	}
	return noBounds
}

func (b *boundWalk) call(e celast.Expr) ValueBounds {
	c := e.AsCall()
	var target ValueBounds
	if c.IsMemberFunction() {
		target = b.walk(c.Target())
	}
	args := make([]ValueBounds, len(c.Args()))
	for i, a := range c.Args() {
		args[i] = b.walk(a)
	}
	b.markUses(e)
	switch c.FunctionName() {
	case operators.OptSelect, operators.Index, operators.OptIndex:
		// A value held by a bounded one.
		if len(args) > 0 {
			return heldBounds(args[0])
		}
	case operators.Add:
		// Concatenation.
		if len(args) == 2 {
			r := ValueBounds{self: args[0].self.plus(args[1].self), held: args[0].held.or(args[1].held)}
			if r.self.known && r.held.known {
				return r
			}
		}
	case operators.Conditional:
		if len(args) == 3 {
			return eitherBounds(args[1], args[2])
		}
	case "orValue", "or":
		if c.IsMemberFunction() && len(args) == 1 {
			return eitherBounds(target, args[0])
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
		return scalarBounds(literalSize(1))
	}
	return noBounds
}

// markUses records how call e uses its operands' sizes: as the overloads
// the checker chose for it declare their parameters (the target is the
// first parameter of a member function).
func (b *boundWalk) markUses(e celast.Expr) {
	c := e.AsCall()
	ids := b.ast.GetOverloadIDs(e.ID())
	if len(ids) == 0 {
		return
	}
	operands := c.Args()
	if c.IsMemberFunction() {
		operands = append([]celast.Expr{c.Target()}, operands...)
	}
	for i, op := range operands {
		if _, ok := b.bounds.sizes[op.ID()]; !ok {
			continue
		}
		use, first := useEither, true
		for _, id := range ids {
			params := overloadParams(b.env, id)
			u := useEither
			if i < len(params) {
				switch params[i].Kind() {
				case types.StringKind:
					u = useString
				case types.ListKind, types.MapKind:
					u = useList
				}
			}
			if first {
				use, first = u, false
			} else if u != use {
				use = useEither
			}
		}
		b.used(op, use)
	}
}

func (b *boundWalk) push(name string, k ValueBounds) {
	if name != "" {
		b.scope[name] = append(b.scope[name], k)
	}
}

func (b *boundWalk) pop(name string) {
	if name != "" {
		b.scope[name] = b.scope[name][:len(b.scope[name])-1]
	}
}

// overloadParamTypes holds the parameter types of every overload of the
// environments seen, by overload id (an id names one signature).
var overloadParamTypes sync.Map

// overloadParams returns the parameter types of the overload id of env.
func overloadParams(env *celgo.Env, id string) []*types.Type {
	if p, ok := overloadParamTypes.Load(id); ok {
		return p.([]*types.Type)
	}
	for _, fn := range env.Functions() {
		for _, o := range fn.OverloadDecls() {
			overloadParamTypes.LoadOrStore(o.ID(), o.ArgTypes())
		}
	}
	p, _ := overloadParamTypes.LoadOrStore(id, []*types.Type(nil))
	return p.([]*types.Type)
}

// boundedSizes is the cost estimator for one expression at one input
// bound B: Kubernetes' (its library functions' costs) with the sizes of
// SizeBounds.
type boundedSizes struct {
	library.CostEstimator
	bounds SizeBounds
	within InputBound
}

func newBoundedSizes(bounds SizeBounds, within InputBound) *boundedSizes {
	e := &boundedSizes{bounds: bounds, within: within}
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
	sb, ok := e.bounds.sizes[x.ID()]
	if !ok {
		return nil
	}
	var unit uint64
	switch sb.use {
	case useString:
		unit = uint64(e.within.Strings)
	case useList:
		unit = uint64(e.within.Lists)
	default:
		unit = uint64(max(e.within.Strings, e.within.Lists))
	}
	return &checker.SizeEstimate{Max: sb.size.at(int(unit))}
}

// EstimateMaxCost is the worst-case cost of a checked expression when the
// request's inputs are within b.
func EstimateMaxCost(env *celgo.Env, a *celgo.Ast, bounds SizeBounds, b InputBound) uint64 {
	est, err := env.EstimateCost(a, newBoundedSizes(bounds, b))
	if err != nil {
		return math.MaxUint64
	}
	total := est.Max
	for _, loops := range bounds.unpriced {
		runs := uint64(1)
		for _, l := range loops {
			runs = saturatingMul(runs, l.at(b.Lists))
		}
		total = saturatingAdd(total, runs)
	}
	return total
}

// at is the size v bounds when B's bound is unit (the most for an
// unknown bound).
func (v valueBound) at(unit int) uint64 {
	if !v.known {
		return math.MaxUint64
	}
	return saturatingAdd(saturatingMul(v.k, uint64(unit)), v.n)
}

func saturatingMul(x, y uint64) uint64 {
	if x != 0 && y > math.MaxUint64/x {
		return math.MaxUint64
	}
	return x * y
}

func saturatingAdd(x, y uint64) uint64 {
	if x > math.MaxUint64-y {
		return math.MaxUint64
	}
	return x + y
}

// untrackedMargin is how far under the limits an estimate must stay for
// its programs to run untracked. cel-go's estimator is the only proof
// that an untracked program stops in time, and it has under-priced
// before (a field selected on a dyn value: unpriced): a margin of 2 keeps
// a program that some other runtime cost is under-priced for within the
// limits all the same.
const untrackedMargin = 2

// WithinLimits reports whether programs whose worst cases are costs may
// run untracked: each within half the per-call limit, all within half the
// budget (untrackedMargin).
func WithinLimits(costs []uint64) bool {
	var total uint64
	for _, c := range costs {
		if c > celconfig.PerCallLimit/untrackedMargin {
			return false
		}
		total = saturatingAdd(total, c)
	}
	return total <= uint64(celconfig.RuntimeCELCostBudget)/untrackedMargin
}

// ValueSizes returns the length of the longest string and the size of
// the largest list or map in v (an unstructured value), returning as soon
// as either is past limit's, and past both when v holds a value of
// another type.
func ValueSizes(v any, limit InputBound) InputBound {
	var most InputBound
	valueSizesInto(v, limit, &most)
	return most
}

func valueSizesInto(v any, limit InputBound, most *InputBound) bool {
	switch x := v.(type) {
	case nil, bool, float64, int64, int, int32, float32:
		return true
	case string:
		most.Strings = max(most.Strings, len(x))
		return most.Strings <= limit.Strings
	case map[string]any:
		most.Lists = max(most.Lists, len(x))
		if most.Lists > limit.Lists {
			return false
		}
		for k, val := range x {
			most.Strings = max(most.Strings, len(k))
			if most.Strings > limit.Strings || !valueSizesInto(val, limit, most) {
				return false
			}
		}
		return true
	case []any:
		most.Lists = max(most.Lists, len(x))
		if most.Lists > limit.Lists {
			return false
		}
		for _, val := range x {
			if !valueSizesInto(val, limit, most) {
				return false
			}
		}
		return true
	}
	most.Strings, most.Lists = limit.Strings+1, limit.Lists+1
	return false
}
