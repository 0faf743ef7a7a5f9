package celruntime

import (
	"errors"
	"reflect"
	"sync"
	"unique"

	celgo "github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Variable is a compiled variable of a policy.
type Variable struct {
	Name string
	Prog celgo.Program
	// untracked is the program without cost tracking, and maxCost its
	// worst case within the variant's untrackedWithin (celcost.go).
	Untracked celgo.Program
	MaxCost   int64
	// shared is the key under which the variable's value is shared by
	// every policy of a request: its expression in canonical form, when
	// it reads nothing but the request (sharedVariableKey); the zero
	// handle otherwise.
	Shared unique.Handle[string]
}

// SharedKeyOf is the handle of sharedVariableKey(expr), zero when the
// variable is not shared.
func SharedKeyOf(expr string) unique.Handle[string] {
	if key := SharedVariableKey(expr); key != "" {
		return unique.Make(key)
	}
	return unique.Handle[string]{}
}

// sharedVariable is a variable's value computed for one request, and
// what computing it cost.
type sharedVariable struct {
	key  unique.Handle[string]
	val  ref.Val
	Cost int64
}

// sharedValues are the values of a request's shared variables, by key.
// The first sharedInline are in a slice found by comparing handles (a key
// is an expression, long to hash; a set declares few), the rest in a map.
type sharedValues struct {
	few  []sharedVariable
	more map[unique.Handle[string]]sharedVariable
}

const sharedInline = 16

func (s *sharedValues) Get(key unique.Handle[string]) (sharedVariable, bool) {
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

func (s *sharedValues) Len() int { return len(s.few) + len(s.more) }

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
		if base, macroParserErr = PolicyBaseEnv(); macroParserErr == nil {
			macroParser, macroParserErr = base.Extend(celgo.EnableMacroCallTracking())
		}
	})
	return macroParser, macroParserErr
}

// PolicyBaseEnv is the policies' environment before a compiler declares
// object, variables and the rest.
func PolicyBaseEnv() (*celgo.Env, error) {
	env, err := PolicyEnv()
	if err != nil {
		return nil, err
	}
	return env.Env(environment.StoredExpressions)
}

// SharedVariableKey returns the canonical form of a variable's expression
// when its value depends on the request alone, so that policies declaring
// the same variable (the Pod Security set has nine allContainers) compute
// it once per request: when every identifier it reads is object,
// oldObject, request, namespaceObject or a loop variable of its own, and
// no loop variable hides a declared one. Otherwise, or when it does not
// parse, "".
func SharedVariableKey(expr string) string {
	base, err := PolicyBaseEnv()
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

// Variables is `variables` in one evaluation of a policy: each variable
// is evaluated when an expression first reads it, once, its cost charged
// to the evaluation's budget, as the composited compiler's own lazy map
// does. Unlike that map, it finds a variable by its name as written,
// without running a regular expression over the name on every read (a set
// of ValidatingPolicies reads its variables thousands of times a second).
type Variables struct {
	Eval   *Evaluator
	Defs   []Variable
	Vals   []ref.Val
	Inputs *Inputs // holds the request's shared variables
}

func (m *Variables) index(key ref.Val) (int, ref.Val) {
	name, ok := key.(types.String)
	if !ok {
		return -1, types.MaybeNoSuchOverloadErr(key)
	}
	for i := range m.Defs {
		if m.Defs[i].Name == string(name) {
			return i, nil
		}
	}
	return -1, nil
}

func (m *Variables) value(i int) ref.Val {
	if m.Vals == nil {
		m.Vals = make([]ref.Val, len(m.Defs))
	}
	if v := m.Vals[i]; v != nil {
		return v
	}
	d := &m.Defs[i]
	if d.Shared != (unique.Handle[string]{}) {
		if sv, ok := m.Inputs.SharedVariables.Get(d.Shared); ok {
			// Charged as if computed here: a policy's budget does not
			// depend on which policies ran before it.
			m.Eval.variablesCost += sv.Cost
			m.Vals[i] = sv.val
			return sv.val
		}
	}
	var v ref.Val
	var err error
	var cost int64
	if m.Eval.Untracked && d.Untracked != nil {
		// Within the variant's bound: its worst case is what another,
		// tracked, policy sharing the value is charged.
		v, _, err = d.Untracked.Eval(m.Eval.Act)
		cost = d.MaxCost
		if err != nil {
			v = types.NewErr("composited variable %q fails to evaluate: %v", d.Name, err)
		}
	} else {
		var details *celgo.EvalDetails
		v, details, err = d.Prog.Eval(m.Eval.Act) // not ContextEval: see celEvaluator.eval
		switch {
		case details == nil || details.ActualCost() == nil:
			v = types.NewErr("unable to calculate cost of variable %q", d.Name)
		case err != nil:
			v = types.NewErr("composited variable %q fails to evaluate: %v", d.Name, err)
		}
		cost = actualCost(details)
	}
	m.Eval.variablesCost += cost
	m.Vals[i] = v
	if d.Shared != (unique.Handle[string]{}) && err == nil {
		m.Inputs.SharedVariables.put(sharedVariable{key: d.Shared, val: v, Cost: cost})
	}
	return v
}

func (m *Variables) Find(key ref.Val) (ref.Val, bool) {
	i, errVal := m.index(key)
	if errVal != nil {
		return errVal, true
	}
	if i < 0 {
		return nil, false
	}
	return m.value(i), true
}

func (m *Variables) Get(key ref.Val) ref.Val {
	if v, found := m.Find(key); found {
		return v
	}
	return types.NewErr("no such key: %v", key)
}

func (m *Variables) Contains(key ref.Val) ref.Val {
	i, errVal := m.index(key)
	if errVal != nil {
		return errVal
	}
	return types.Bool(i >= 0)
}

func (m *Variables) IsSet(field ref.Val) ref.Val { return m.Contains(field) }

func (m *Variables) Iterator() traits.Iterator {
	names := make([]string, len(m.Defs))
	for i := range m.Defs {
		names[i] = m.Defs[i].Name
	}
	return types.NewStringList(types.DefaultTypeAdapter, names).(traits.Lister).Iterator()
}

func (m *Variables) Size() ref.Val { return types.Int(len(m.Defs)) }

func (m *Variables) ConvertToNative(reflect.Type) (any, error) {
	return nil, errors.New("variables have no native value")
}

func (m *Variables) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return variablesType
	}
	return types.NewErr("variables cannot be converted to %s", t.TypeName())
}

func (m *Variables) Equal(other ref.Val) ref.Val { return types.Bool(other == ref.Val(m)) }

func (m *Variables) Type() ref.Type { return variablesType }

func (m *Variables) Value() any { return m }
