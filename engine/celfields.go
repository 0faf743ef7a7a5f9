package engine

import (
	"fmt"
	"strings"

	celgo "github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/charter-dev/charter/engine/fault"
)

// celFields compiles the CEL fields of one policy (or one validate.cel
// rule) with its compiler, and reports each fault at the field's path.
// Every kind writes its expressions, variables and conditions the same
// way, so a fault reads the same whichever kind it is in.
type celFields struct {
	compiler *celCompiler
	decls    plugincel.OptionalVariableDeclarations
	f        *fault.Collector
}

// program compiles a at field with the fields' declarations: an empty
// expression, or one that does not compile, is a fault and gives nil.
func (c celFields) program(a plugincel.ExpressionAccessor, field string) celgo.Program {
	return c.programWith(a, field, c.decls)
}

// programWith is program with other declarations (a messageExpression
// may not use the authorizer, for instance).
func (c celFields) programWith(a plugincel.ExpressionAccessor, field string, decls plugincel.OptionalVariableDeclarations) celgo.Program {
	if strings.TrimSpace(a.GetExpression()) == "" {
		c.f.Add(field, "expression must not be empty")
		return nil
	}
	res := c.compiler.CompileCELExpression(a, decls, environment.StoredExpressions)
	if res.Error != nil {
		c.f.Add(field, celFault(res.Error.Detail))
		return nil
	}
	return res.Program
}

// variables compiles vars, the i-th at field[i]. The compiler stores every
// variable, compiled or not, so later expressions may name it; a broken
// one is reported here, and evaluates to an error.
func (c celFields) variables(vars []admissionregistrationv1.Variable, field string) {
	for i, v := range vars {
		at := fmt.Sprintf("%s[%d]", field, i)
		if v.Name == "" {
			c.f.Add(at+".name", "a variable needs a name")
			continue
		}
		res := c.compiler.CompileAndStoreVariable(&celAccessor{name: v.Name, expr: v.Expression, returns: anyReturn()}, c.decls, environment.StoredExpressions)
		if res.Error != nil {
			c.f.Add(at+".expression", celFault(res.Error.Detail))
		}
	}
}

// conditions compiles conditions as booleans, the i-th at
// field[i].expression, and returns those that compiled.
func (c celFields) conditions(conditions []admissionregistrationv1.MatchCondition, field string) []celProgram {
	var out []celProgram
	for i, mc := range conditions {
		at := fmt.Sprintf("%s[%d].expression", field, i)
		if p := c.program(&celAccessor{name: mc.Name, expr: mc.Expression, returns: boolReturn()}, at); p != nil {
			out = append(out, celProgram{expr: mc.Expression, program: p})
		}
	}
	return out
}
