package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/traits"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// TestSharedAdapterWrapsEachValueOnce: the request's maps and lists are
// wrapped once for every expression that reads them, a changed map reads
// as changed, and different maps and lists (a shorter view of the same
// array too) stay apart.
func TestSharedAdapterWrapsEachValueOnce(t *testing.T) {
	a := &sharedAdapter{}
	spec := map[string]any{"replicas": int64(1)}
	list := []any{"a", "b", "c"}
	if a.NativeToValue(spec) != a.NativeToValue(spec) {
		t.Error("one map wrapped twice")
	}
	if a.NativeToValue(list) != a.NativeToValue(list) {
		t.Error("one list wrapped twice")
	}
	if a.NativeToValue(list) == a.NativeToValue(list[:2]) {
		t.Error("a shorter view of a list shares its wrapper")
	}
	if got := a.NativeToValue(list[:2]).(traits.Sizer).Size(); got != types.Int(2) {
		t.Errorf("shorter view has size %v, want 2", got)
	}
	if a.NativeToValue(spec) == a.NativeToValue(map[string]any{"replicas": int64(1)}) {
		t.Error("two maps share a wrapper")
	}
	wrapped := a.NativeToValue(spec).(traits.Mapper)
	spec["replicas"] = int64(3)
	if got := wrapped.Get(types.String("replicas")); got != types.Int(3) {
		t.Errorf("changed map reads %v, want 3", got)
	}
	if a.NativeToValue([]any{}).(traits.Sizer).Size() != types.Int(0) || a.NativeToValue(map[string]any(nil)) == nil {
		t.Error("empty values")
	}
	if a.NativeToValue("s") != types.String("s") || a.NativeToValue(int64(2)) != types.Int(2) {
		t.Error("scalars are not converted as by the default adapter")
	}
}

// TestCELVariablesAreLazyOnceAndCharged: a ValidatingPolicy's variable is
// evaluated when first read, once per evaluation however often it is read,
// its cost charged to the evaluation's budget (a budget short of the
// variable's cost fails with the budget error); a variable that cannot be
// evaluated makes the expression reading it fail, naming it.
func TestCELVariablesAreLazyOnceAndCharged(t *testing.T) {
	env, err := celPolicyEnv()
	if err != nil {
		t.Fatal(err)
	}
	compiler, err := plugincel.NewCompositedCompiler(env)
	if err != nil {
		t.Fatal(err)
	}
	decls := plugincel.OptionalVariableDeclarations{}
	var defs []celVariable
	for _, v := range []struct{ name, expr string }{
		{"doubled", "[1, 2, 3, 4, 5, 6, 7, 8].map(x, x * 2)"},
		{"total", "variables.doubled.size()"},
		{"broken", "object.spec.missing"},
	} {
		res := compiler.CompileAndStoreVariable(&celAccessor{name: v.name, expr: v.expr, returns: anyReturn()}, decls, environment.StoredExpressions)
		if res.Error != nil {
			t.Fatal(res.Error)
		}
		defs = append(defs, celVariable{name: v.name, program: res.Program})
	}
	program := func(expr string) *celProgram {
		res := compiler.CompileCELExpression(&celAccessor{expr: expr, returns: boolReturn()}, decls, environment.StoredExpressions)
		if res.Error != nil {
			t.Fatal(res.Error)
		}
		return &celProgram{expr: expr, program: res.Program}
	}
	reads := program("variables.total == 8 && variables.doubled[7] == 16")
	readsAgain := program("variables.total == 8")
	alone := program("8 == 8")

	evaluator := func(budget int64) *celEvaluator {
		act := &celActivation{in: &celInputs{namespace: types.NullValue}, object: types.DefaultTypeAdapter.NativeToValue(map[string]any{"spec": map[string]any{}}),
			oldObject: types.NullValue, request: types.NullValue, params: types.NullValue}
		e := &celEvaluator{ctx: compiler.CreateContext(context.Background()), act: act, budget: budget}
		act.variables = &celVariables{e: e, defs: defs}
		return e
	}
	const plenty = 1 << 40
	e := evaluator(plenty)
	if val, err := e.eval(reads); err != nil || val != types.True {
		t.Fatalf("reads: %v, %v", val, err)
	}
	withVariables := plenty - e.budget
	before := e.budget
	if val, err := e.eval(readsAgain); err != nil || val != types.True {
		t.Fatalf("reads again: %v, %v", val, err)
	}
	again := before - e.budget

	bare := evaluator(plenty)
	if _, err := bare.eval(alone); err != nil {
		t.Fatal(err)
	}
	if own := plenty - bare.budget; again > own+5 || withVariables <= again+10 {
		t.Errorf("costs: first read %d, second read %d, an expression without variables %d: the variables were not charged once", withVariables, again, own)
	}
	if _, err := evaluator(withVariables - 1).eval(reads); !errors.Is(err, errCELBudget) {
		t.Errorf("budget short of the variables' cost: err = %v, want the budget error", err)
	}
	if _, err := evaluator(plenty).eval(program("variables.broken == 1")); err == nil || !strings.Contains(err.Error(), `composited variable "broken" fails to evaluate`) {
		t.Errorf("broken variable: err = %v", err)
	}
	vars := evaluator(plenty).act.(*celActivation).variables.(*celVariables)
	if vars.Contains(types.String("total")) != types.True || vars.Contains(types.String("nope")) != types.False || vars.Size() != types.Int(3) {
		t.Error("Contains or Size")
	}
	if _, found := vars.Find(types.String("nope")); found {
		t.Error("found a variable that is not declared")
	}
	if val, err := evaluator(plenty).eval(program("has(variables.total)")); err != nil || val != types.True {
		t.Errorf("has(variables.total): %v, %v", val, err)
	}
}

// TestSharedVariableKey: a variable is shared by the policies of a request
// only when it reads nothing but the request (and its own loop
// variables); equal expressions written differently share one key.
func TestSharedVariableKey(t *testing.T) {
	allContainers := sharedVariableKey("object.spec.containers +  object.spec.?initContainers.orValue([])")
	if allContainers == "" || allContainers != sharedVariableKey("(object.spec.containers +\n    object.spec.?initContainers.orValue([]))") {
		t.Errorf("allContainers keys: %q", allContainers)
	}
	for expr, shared := range map[string]bool{
		"['CHOWN', 'KILL']": true,
		"object.spec.containers.all(c, c.image != '' && request.operation == 'CREATE')": true,
		"namespaceObject.metadata.name == oldObject.metadata.namespace":                 true,
		"cel.bind(x, object.spec, x.replicas)":                                          true,
		"variables.allContainers.size()":                                                false,
		"params.limit":                                                                  false,
		"resource.Get('v1', 'configmaps', 'default', 'c')":                              false,
		"exceptions.allowedValues":                                                      false,
		"object.spec.containers.map(variables, variables.image) + variables.x":          false,
		"[1, 2].map(object, object * 2)":                                                false,
		"object.spec.containers.all(c, c.image != other)":                               false,
		"object.spec.(": false,
	} {
		if got := sharedVariableKey(expr) != ""; got != shared {
			t.Errorf("%s: shared = %v, want %v", expr, got, shared)
		}
	}
}

// TestSharedVariablesComputedOncePerRequest: two policies declaring the
// same request-only variable get one value per request, each charged its
// cost; a variable reading another is not shared.
func TestSharedVariablesComputedOncePerRequest(t *testing.T) {
	env, err := celPolicyEnv()
	if err != nil {
		t.Fatal(err)
	}
	inputs := &celInputs{namespace: types.NullValue, adapter: &sharedAdapter{}}
	inputs.object = inputs.adapter.NativeToValue(map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"image": "a"}, map[string]any{"image": "b"}}}})
	evaluate := func(defsExpr map[string]string, expr string) (*celEvaluator, *celVariables) {
		compiler, err := plugincel.NewCompositedCompiler(env)
		if err != nil {
			t.Fatal(err)
		}
		decls := plugincel.OptionalVariableDeclarations{}
		var defs []celVariable
		for _, name := range []string{"images", "count"} {
			e, ok := defsExpr[name]
			if !ok {
				continue
			}
			res := compiler.CompileAndStoreVariable(&celAccessor{name: name, expr: e, returns: anyReturn()}, decls, environment.StoredExpressions)
			if res.Error != nil {
				t.Fatal(res.Error)
			}
			defs = append(defs, celVariable{name: name, program: res.Program, shared: sharedVariableKey(e)})
		}
		res := compiler.CompileCELExpression(&celAccessor{expr: expr, returns: boolReturn()}, decls, environment.StoredExpressions)
		if res.Error != nil {
			t.Fatal(res.Error)
		}
		act := &celActivation{in: inputs, object: inputs.object, oldObject: types.NullValue, request: types.NullValue, params: types.NullValue}
		e := &celEvaluator{ctx: compiler.CreateContext(context.Background()), act: act, budget: 1 << 40}
		vars := &celVariables{e: e, defs: defs, inputs: inputs}
		act.variables = vars
		if val, err := e.eval(&celProgram{program: res.Program}); err != nil || val != types.True {
			t.Fatalf("%s: %v, %v", expr, val, err)
		}
		return e, vars
	}
	first, v1 := evaluate(map[string]string{"images": "object.spec.containers.map(c, c.image)", "count": "variables.images.size()"}, "variables.count == 2")
	second, v2 := evaluate(map[string]string{"images": "object.spec.containers.map(c,   c.image)"}, "variables.images == ['a', 'b']")
	if len(inputs.sharedVariables) != 1 {
		t.Fatalf("%d shared values, want the one of images (count reads a variable)", len(inputs.sharedVariables))
	}
	if v1.vals[0] != v2.vals[0] {
		t.Error("the second policy computed images again")
	}
	if spentFirst, spentSecond := 1<<40-first.budget, 1<<40-second.budget; spentSecond < inputs.sharedVariables[v1.defs[0].shared].cost || spentFirst <= spentSecond {
		t.Errorf("budget spent: first policy %d, second %d, images cost %d: a shared value is charged to each policy", spentFirst, spentSecond, inputs.sharedVariables[v1.defs[0].shared].cost)
	}
}
