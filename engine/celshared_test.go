package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"google.golang.org/protobuf/types/known/structpb"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/charter-dev/charter/engine/celenv"
	"github.com/charter-dev/charter/engine/celruntime"
)

// TestSharedAdapterWrapsEachValueOnce: the request's maps and lists are
// wrapped once for every expression that reads them (reading them again
// allocates nothing), a changed map reads as changed, and a map or list
// replaced under its key or index (a shorter view of the same array too)
// gets a wrapper of its own.
func TestSharedAdapterWrapsEachValueOnce(t *testing.T) {
	a := &celenv.SharedAdapter{}
	list := []any{"a", "b", "c"}
	spec := map[string]any{"replicas": int64(1), "list": list,
		"containers": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}}
	root := a.NativeToValue(map[string]any{"spec": spec}).(traits.Mapper)
	get := func(m ref.Val, key string) ref.Val { return m.(traits.Mapper).Get(types.String(key)) }
	at := func(l ref.Val, i int) ref.Val { return l.(traits.Lister).Get(types.Int(i)) }
	if get(root, "spec") != get(root, "spec") {
		t.Error("one map wrapped twice")
	}
	if get(get(root, "spec"), "list") != get(get(root, "spec"), "list") {
		t.Error("one list wrapped twice")
	}
	containers := get(get(root, "spec"), "containers")
	if at(containers, 1) != at(containers, 1) {
		t.Error("one list element wrapped twice")
	}
	if n := testing.AllocsPerRun(20, func() { at(get(get(root, "spec"), "containers"), 1) }); n != 0 {
		t.Errorf("reading object.spec.containers[1] again allocates %v times, want 0", n)
	}
	wrapped := get(root, "spec").(traits.Mapper)
	spec["replicas"] = int64(3)
	if got := wrapped.Get(types.String("replicas")); got != types.Int(3) {
		t.Errorf("changed map reads %v, want 3", got)
	}
	old := get(wrapped, "list")
	spec["list"] = list[:2]
	if shorter := get(wrapped, "list"); shorter == old || shorter.(traits.Sizer).Size() != types.Int(2) {
		t.Errorf("a shorter view of a list reads as the list it was: size %v", shorter.(traits.Sizer).Size())
	}
	spec["containers"].([]any)[1] = map[string]any{"name": "c"}
	if got := get(at(containers, 1), "name"); got != types.String("c") {
		t.Errorf("replaced list element reads %v, want c", got)
	}
	if a.NativeToValue([]any{}).(traits.Sizer).Size() != types.Int(0) || a.NativeToValue(map[string]any(nil)) == nil {
		t.Error("empty values")
	}
	if a.NativeToValue("s") != types.String("s") || a.NativeToValue(int64(2)) != types.Int(2) {
		t.Error("scalars are not converted as by the default adapter")
	}
}

// TestCELValuesAsCELGo: every expression over a request's object gives
// the same value, or the same error, through charter's wrappers
// (celenv.SharedAdapter) as through cel-go's own (types.DefaultTypeAdapter), and
// the wrappers convert to native and JSON values as cel-go's do.
func TestCELValuesAsCELGo(t *testing.T) {
	base, err := celruntime.PolicyBaseEnv()
	if err != nil {
		t.Fatal(err)
	}
	env, err := base.Extend(celgo.Variable("object", celgo.DynType))
	if err != nil {
		t.Fatal(err)
	}
	object := func() map[string]any {
		return map[string]any{
			"metadata": map[string]any{"name": "web", "labels": map[string]any{"app": "web", "tier": "db"}},
			"spec": map[string]any{
				"replicas": int64(3), "hostNetwork": false, "args": []any{"b", "a", "c"},
				"containers": []any{
					map[string]any{"name": "a", "ports": []any{map[string]any{"containerPort": int64(80)}},
						"securityContext": map[string]any{"privileged": true, "capabilities": map[string]any{"drop": []any{"ALL"}}}},
					map[string]any{"name": "b"},
				},
				"initContainers": []any{map[string]any{"name": "i", "securityContext": map[string]any{}}},
				"empty":          []any{},
				"nothing":        map[string]any{},
				"unset":          nil,
			},
		}
	}
	for _, expr := range []string{
		"object.spec.containers.all(c, c.?securityContext.?privileged.orValue(false) == false)",
		"object.spec.containers.map(c, c.name)",
		"object.spec.containers.filter(c, has(c.ports)).size()",
		"object.spec.containers.exists_one(c, c.name == 'a')",
		"object.spec.containers.exists(c, c.?securityContext.?capabilities.?drop.orValue([]).exists_one(x, x == 'ALL'))",
		"object.spec.containers + object.spec.?initContainers.orValue([]) + object.spec.?ephemeralContainers.orValue([])",
		"(object.spec.containers + object.spec.initContainers).map(c, c.name)",
		"(object.spec.containers + object.spec.initContainers)[2].name",
		"(object.spec.containers + object.spec.initContainers)[7]",
		"(object.spec.containers + object.spec.initContainers) == (object.spec.containers + object.spec.initContainers)",
		"(object.spec.containers + object.spec.initContainers) == object.spec.containers",
		"object.spec.initContainers[0] in (object.spec.containers + object.spec.initContainers)",
		"'c' in object.spec.args + ['x']",
		"[1, 2] + object.spec.args",
		"object.spec.args + object.spec.empty",
		"object.spec.empty + object.spec.args",
		"object.spec.containers[0] == object.spec.containers[0]",
		"object.spec.containers == object.spec.containers",
		"object.spec.containers[0] in object.spec.containers",
		"{'name': 'b'} in object.spec.containers",
		"'app' in object.metadata.labels",
		"object.metadata.labels.all(k, k.size() > 2)",
		"object.metadata.labels.filter(k, k == 'app')",
		"object.metadata.labels.exists(k, object.metadata.labels[k] == 'db')",
		"object.metadata.labels.size() + size(object.spec.args)",
		"object.metadata.labels == {'app': 'web', 'tier': 'db'}",
		"{'tier': 'db', 'app': 'web'} == object.metadata.labels",
		"object.metadata.labels == {'app': 'web'}",
		"object.spec == {'a': 1}",
		"object.spec.nothing == {}",
		"has(object.spec.hostNetwork) && !has(object.spec.nope)",
		"object.spec.nope",
		"object.spec.containers[9]",
		"object.spec.containers['x']",
		"object.spec.containers[-1]",
		"object.metadata.labels[1]",
		"object.spec.unset == null",
		"object.spec.containers.map(c, c.securityContext.privileged)",
		"object.spec.containers.all(c, c.ports.all(p, p.containerPort > 0))",
		"type(object) == map && type(object.spec.containers) == list && type(object.spec.containers + object.spec.initContainers) == list",
		"dyn(object.spec.containers).size() == 2",
		"object.spec.args.join(',')",
		"object.spec.args.isSorted()",
		"object.spec.args.sum()",
		"string(object.spec.replicas) + object.metadata.name",
		"object.spec.?containers[0].?name.orValue('') == 'a'",
		"object.spec.containers.map(c, c.?ports.orValue([]).size())",
		"cel.bind(all, object.spec.containers + object.spec.initContainers, all.size() == 3 && all[2].name == 'i')",
		"object.spec.nothing.size() == 0 && object.spec.empty.size() == 0",
	} {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", expr, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		eval := func(obj ref.Val) (ref.Val, error) {
			val, _, err := prg.Eval(map[string]any{"object": obj})
			return val, err
		}
		theirs, theirErr := eval(types.DefaultTypeAdapter.NativeToValue(object()))
		ours, ourErr := eval((&celenv.SharedAdapter{}).NativeToValue(object()))
		switch {
		case theirErr != nil || ourErr != nil:
			if fmt.Sprint(theirErr) != fmt.Sprint(ourErr) {
				t.Errorf("%s: error %v, cel-go's %v", expr, ourErr, theirErr)
			}
		case ours.Type() != theirs.Type() || ours.Equal(theirs) != types.True || theirs.Equal(ours) != types.True:
			t.Errorf("%s = %v (%s), cel-go's %v (%s)", expr, ours, ours.Type(), theirs, theirs.Type())
		case types.Format(ours) != types.Format(theirs) && ours.Type() != types.MapType:
			t.Errorf("%s formats as %s, cel-go's as %s", expr, types.Format(ours), types.Format(theirs))
		}
	}
	ours, theirs := (&celenv.SharedAdapter{}).NativeToValue(object()), types.DefaultTypeAdapter.NativeToValue(object())
	for _, typ := range []reflect.Type{reflect.TypeFor[any](), reflect.TypeFor[map[string]any](), reflect.TypeFor[*structpb.Value](), reflect.TypeFor[*structpb.Struct]()} {
		o, oErr := ours.ConvertToNative(typ)
		c, cErr := theirs.ConvertToNative(typ)
		if fmt.Sprint(oErr) != fmt.Sprint(cErr) || !reflect.DeepEqual(fmt.Sprint(o), fmt.Sprint(c)) {
			t.Errorf("ConvertToNative(%s) = %v, %v; cel-go's %v, %v", typ, o, oErr, c, cErr)
		}
	}
	list := ours.(traits.Mapper).Get(types.String("spec")).(traits.Mapper).Get(types.String("containers"))
	concat := list.(traits.Adder).Add(ours.(traits.Mapper).Get(types.String("spec")).(traits.Mapper).Get(types.String("initContainers")))
	for _, l := range []ref.Val{list, concat} {
		for _, typ := range []reflect.Type{reflect.TypeFor[[]any](), reflect.TypeFor[*structpb.ListValue](), reflect.TypeFor[[]map[string]any]()} {
			got, err := l.ConvertToNative(typ)
			if err != nil || reflect.ValueOf(got).Type() != typ {
				t.Errorf("%T ConvertToNative(%s) = %v, %v", l, typ, got, err)
			}
		}
		if l.(traits.Lister).Iterator().Type() != types.IteratorType {
			t.Errorf("%T: iterator type", l)
		}
	}
}

// TestCELVariablesAreLazyOnceAndCharged: a ValidatingPolicy's variable is
// evaluated when first read, once per evaluation however often it is read,
// its cost charged to the evaluation's budget (a budget short of the
// variable's cost fails with the budget error); a variable that cannot be
// evaluated makes the expression reading it fail, naming it.
func TestCELVariablesAreLazyOnceAndCharged(t *testing.T) {
	env, err := celruntime.PolicyEnv()
	if err != nil {
		t.Fatal(err)
	}
	compiler, err := plugincel.NewCompositedCompiler(env)
	if err != nil {
		t.Fatal(err)
	}
	decls := plugincel.OptionalVariableDeclarations{}
	var defs []celruntime.Variable
	for _, v := range []struct{ name, expr string }{
		{"doubled", "[1, 2, 3, 4, 5, 6, 7, 8].map(x, x * 2)"},
		{"total", "variables.doubled.size()"},
		{"broken", "object.spec.missing"},
	} {
		res := compiler.CompileAndStoreVariable(&celruntime.Accessor{Name: v.name, Expr: v.expr, Returns: celruntime.AnyReturn()}, decls, environment.StoredExpressions)
		if res.Error != nil {
			t.Fatal(res.Error)
		}
		defs = append(defs, celruntime.Variable{Name: v.name, Prog: res.Program})
	}
	program := func(expr string) *celruntime.Program {
		res := compiler.CompileCELExpression(&celruntime.Accessor{Expr: expr, Returns: celruntime.BoolReturn()}, decls, environment.StoredExpressions)
		if res.Error != nil {
			t.Fatal(res.Error)
		}
		return &celruntime.Program{Expr: expr, Prog: res.Program}
	}
	reads := program("variables.total == 8 && variables.doubled[7] == 16")
	readsAgain := program("variables.total == 8")
	alone := program("8 == 8")

	evaluator := func(budget int64) *celruntime.Evaluator {
		act := &celruntime.Activation{In: &celruntime.Inputs{Namespace: types.NullValue}, Object: types.DefaultTypeAdapter.NativeToValue(map[string]any{"spec": map[string]any{}}),
			OldObject: types.NullValue, Request: types.NullValue, Params: types.NullValue}
		e := &celruntime.Evaluator{Ctx: compiler.CreateContext(context.Background()), Act: act, Budget: budget}
		act.Variables = &celruntime.Variables{Eval: e, Defs: defs}
		return e
	}
	const plenty = 1 << 40
	e := evaluator(plenty)
	if val, err := e.Eval(reads); err != nil || val != types.True {
		t.Fatalf("reads: %v, %v", val, err)
	}
	withVariables := plenty - e.Budget
	before := e.Budget
	if val, err := e.Eval(readsAgain); err != nil || val != types.True {
		t.Fatalf("reads again: %v, %v", val, err)
	}
	again := before - e.Budget

	bare := evaluator(plenty)
	if _, err := bare.Eval(alone); err != nil {
		t.Fatal(err)
	}
	if own := plenty - bare.Budget; again > own+5 || withVariables <= again+10 {
		t.Errorf("costs: first read %d, second read %d, an expression without variables %d: the variables were not charged once", withVariables, again, own)
	}
	if _, err := evaluator(withVariables - 1).Eval(reads); !errors.Is(err, celruntime.ErrBudget) {
		t.Errorf("budget short of the variables' cost: err = %v, want the budget error", err)
	}
	if _, err := evaluator(plenty).Eval(program("variables.broken == 1")); err == nil || !strings.Contains(err.Error(), `composited variable "broken" fails to evaluate`) {
		t.Errorf("broken variable: err = %v", err)
	}
	vars := evaluator(plenty).Act.(*celruntime.Activation).Variables.(*celruntime.Variables)
	if vars.Contains(types.String("total")) != types.True || vars.Contains(types.String("nope")) != types.False || vars.Size() != types.Int(3) {
		t.Error("Contains or Size")
	}
	if _, found := vars.Find(types.String("nope")); found {
		t.Error("found a variable that is not declared")
	}
	if val, err := evaluator(plenty).Eval(program("has(variables.total)")); err != nil || val != types.True {
		t.Errorf("has(variables.total): %v, %v", val, err)
	}
}

// TestSharedVariableKey: a variable is shared by the policies of a request
// only when it reads nothing but the request (and its own loop
// variables); equal expressions written differently share one key.
func TestSharedVariableKey(t *testing.T) {
	allContainers := celruntime.SharedVariableKey("object.spec.containers +  object.spec.?initContainers.orValue([])")
	if allContainers == "" || allContainers != celruntime.SharedVariableKey("(object.spec.containers +\n    object.spec.?initContainers.orValue([]))") {
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
		if got := celruntime.SharedVariableKey(expr) != ""; got != shared {
			t.Errorf("%s: shared = %v, want %v", expr, got, shared)
		}
	}
}

// TestSharedVariablesComputedOncePerRequest: two policies declaring the
// same request-only variable get one value per request, each charged its
// cost; a variable reading another is not shared.
func TestSharedVariablesComputedOncePerRequest(t *testing.T) {
	env, err := celruntime.PolicyEnv()
	if err != nil {
		t.Fatal(err)
	}
	inputs := &celruntime.Inputs{Namespace: types.NullValue}
	inputs.Object = inputs.Adapter.NativeToValue(map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"image": "a"}, map[string]any{"image": "b"}}}})
	evaluate := func(defsExpr map[string]string, expr string) (*celruntime.Evaluator, *celruntime.Variables) {
		compiler, err := plugincel.NewCompositedCompiler(env)
		if err != nil {
			t.Fatal(err)
		}
		decls := plugincel.OptionalVariableDeclarations{}
		var defs []celruntime.Variable
		for _, name := range []string{"images", "count"} {
			e, ok := defsExpr[name]
			if !ok {
				continue
			}
			res := compiler.CompileAndStoreVariable(&celruntime.Accessor{Name: name, Expr: e, Returns: celruntime.AnyReturn()}, decls, environment.StoredExpressions)
			if res.Error != nil {
				t.Fatal(res.Error)
			}
			defs = append(defs, celruntime.Variable{Name: name, Prog: res.Program, Shared: celruntime.SharedKeyOf(e)})
		}
		res := compiler.CompileCELExpression(&celruntime.Accessor{Expr: expr, Returns: celruntime.BoolReturn()}, decls, environment.StoredExpressions)
		if res.Error != nil {
			t.Fatal(res.Error)
		}
		act := &celruntime.Activation{In: inputs, Object: inputs.Object, OldObject: types.NullValue, Request: types.NullValue, Params: types.NullValue}
		e := &celruntime.Evaluator{Ctx: compiler.CreateContext(context.Background()), Act: act, Budget: 1 << 40}
		vars := &celruntime.Variables{Eval: e, Defs: defs, Inputs: inputs}
		act.Variables = vars
		if val, err := e.Eval(&celruntime.Program{Prog: res.Program}); err != nil || val != types.True {
			t.Fatalf("%s: %v, %v", expr, val, err)
		}
		return e, vars
	}
	first, v1 := evaluate(map[string]string{"images": "object.spec.containers.map(c, c.image)", "count": "variables.images.size()"}, "variables.count == 2")
	second, v2 := evaluate(map[string]string{"images": "object.spec.containers.map(c,   c.image)"}, "variables.images == ['a', 'b']")
	if inputs.SharedVariables.Len() != 1 {
		t.Fatalf("%d shared values, want the one of images (count reads a variable)", inputs.SharedVariables.Len())
	}
	if v1.Vals[0] != v2.Vals[0] {
		t.Error("the second policy computed images again")
	}
	images, _ := inputs.SharedVariables.Get(v1.Defs[0].Shared)
	if spentFirst, spentSecond := 1<<40-first.Budget, 1<<40-second.Budget; spentSecond < images.Cost || spentFirst <= spentSecond {
		t.Errorf("budget spent: first policy %d, second %d, images cost %d: a shared value is charged to each policy", spentFirst, spentSecond, images.Cost)
	}
}
