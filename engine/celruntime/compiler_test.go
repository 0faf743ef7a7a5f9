package celruntime

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/cel-go/common/types"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// evalWithVariables evaluates a compiled program with the policy's
// variables bound and no request, and returns its value and the cost the
// variables charged.
func evalWithVariables(t *testing.T, c *Compiler, res plugincel.CompilationResult) (any, int64) {
	t.Helper()
	if res.Error != nil {
		t.Fatalf("compile: %v", res.Error)
	}
	ctx := c.CreateContext(context.Background())
	act := map[string]any{"object": map[string]any{"kind": "Pod"}, "oldObject": nil}
	act["variables"] = ctx.Variables(act)
	val, _, err := res.Program.ContextEval(ctx, act)
	if err != nil {
		t.Fatalf("eval: %v", err)
	}
	return val.Value(), ctx.GetAndResetCost()
}

// TestCELCompilerVariablesArePolicyOwn: policies compiled in one shared
// environment see only their own variables, typed as they were declared,
// as with a CompositedCompiler per policy.
func TestCELCompilerVariablesArePolicyOwn(t *testing.T) {
	env, err := PolicyCompiler()
	if err != nil {
		t.Fatal(err)
	}
	decls := plugincel.OptionalVariableDeclarations{}
	compile := func(c *Compiler, expr string) plugincel.CompilationResult {
		return c.CompileCELExpression(&Accessor{Expr: expr, Returns: BoolReturn()}, decls, environment.StoredExpressions)
	}
	store := func(c *Compiler, name, expr string) {
		if res := c.CompileAndStoreVariable(&Accessor{Name: name, Expr: expr, Returns: AnyReturn()}, decls, environment.StoredExpressions); res.Error != nil {
			t.Fatalf("variable %s: %v", name, res.Error)
		}
	}
	one, two := env.ForPolicy(), env.ForPolicy()
	store(one, "kind", "object.kind")
	store(one, "team", "'platform'")
	store(one, "doubled", "[1, 2, 3].map(x, x * 2)")
	store(two, "replicas", "3")

	got, cost := evalWithVariables(t, one, compile(one, "variables.kind == 'Pod' && variables.team == 'platform' && variables.doubled[2] == 6"))
	if got != true {
		t.Errorf("policy one's variables evaluated to %v, want true", got)
	}
	if cost <= 0 {
		t.Errorf("the variables evaluated charged cost %d to the context, want their cost (the rule's budget counts it)", cost)
	}
	if got, _ := evalWithVariables(t, two, compile(two, "variables.replicas > 2")); got != true {
		t.Errorf("policy two's variables evaluated to %v, want true", got)
	}
	for _, tc := range []struct {
		name string
		c    *Compiler
		expr string
		want string
	}{
		{"another policy's variable", two, "variables.team == 'platform'", "undefined field 'team'"},
		{"a variable's declared type", one, "variables.team == 1", "no matching overload"},
		{"before any variable", env.ForPolicy(), "variables.kind == 'Pod'", "undefined field 'kind'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := compile(tc.c, tc.expr)
			if res.Error == nil || !strings.Contains(res.Error.Detail, tc.want) {
				t.Errorf("compile %q = %v, want an error with %q", tc.expr, res.Error, tc.want)
			}
		})
	}
}

// TestCELCompilerConcurrentPolicies compiles policies whose variables
// have the same names and different types at once (run with -race): each
// is checked against its own.
func TestCELCompilerConcurrentPolicies(t *testing.T) {
	env, err := PolicyCompiler()
	if err != nil {
		t.Fatal(err)
	}
	decls := plugincel.OptionalVariableDeclarations{}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			c := env.ForPolicy()
			value, literal := fmt.Sprint(i), fmt.Sprintf("'%d'", i)
			if i%2 == 0 {
				value, literal = literal, fmt.Sprint(i)
			}
			c.CompileAndStoreVariable(&Accessor{Name: "v", Expr: value, Returns: AnyReturn()}, decls, environment.StoredExpressions)
			for range 20 {
				ok := c.CompileCELExpression(&Accessor{Expr: "variables.v == " + value, Returns: BoolReturn()}, decls, environment.StoredExpressions)
				bad := c.CompileCELExpression(&Accessor{Expr: "variables.v == " + literal, Returns: BoolReturn()}, decls, environment.StoredExpressions)
				if ok.Error != nil || bad.Error == nil {
					errs <- fmt.Errorf("policy %d (v = %s): same type: %v; other type compiled: %v", i, value, ok.Error, bad.Error == nil)
					return
				}
				if v, _, err := ok.Program.Eval(map[string]any{"variables": c.CreateContext(context.Background()).Variables(map[string]any{})}); err != nil || v != types.True {
					errs <- fmt.Errorf("policy %d: variables.v == %s evaluated to %v, %v", i, value, v, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
