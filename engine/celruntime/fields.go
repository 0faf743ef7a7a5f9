package celruntime

import (
	"fmt"
	"strings"

	celgo "github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/charter-dev/charter/engine/fault"
)

// Fields compiles the CEL fields of one policy (or one validate.cel
// rule) with its compiler, and reports each fault at the field's path.
// Every kind writes its expressions, variables and conditions the same
// way, so a fault reads the same whichever kind it is in.
type Fields struct {
	Compiler *Compiler
	Decls    plugincel.OptionalVariableDeclarations
	Faults   *fault.Collector
}

// Program compiles a at field with the fields' declarations: an empty
// expression, or one that does not compile, is a fault and gives nil.
func (c Fields) Program(a plugincel.ExpressionAccessor, field string) celgo.Program {
	return c.ProgramWith(a, field, c.Decls)
}

// ProgramWith is program with other declarations (a messageExpression
// may not use the authorizer, for instance).
func (c Fields) ProgramWith(a plugincel.ExpressionAccessor, field string, decls plugincel.OptionalVariableDeclarations) celgo.Program {
	if strings.TrimSpace(a.GetExpression()) == "" {
		c.Faults.Add(field, "expression must not be empty")
		return nil
	}
	res := c.Compiler.CompileCELExpression(a, decls, environment.StoredExpressions)
	if res.Error != nil {
		c.Faults.Add(field, Fault(res.Error.Detail))
		return nil
	}
	return res.Program
}

// Variables compiles vars, the i-th at field[i]. The compiler stores every
// variable, compiled or not, so later expressions may name it; a broken
// one is reported here, and evaluates to an error.
func (c Fields) Variables(vars []admissionregistrationv1.Variable, field string) {
	for i, v := range vars {
		at := fmt.Sprintf("%s[%d]", field, i)
		if v.Name == "" {
			c.Faults.Add(at+".name", "a variable needs a name")
			continue
		}
		res := c.Compiler.CompileAndStoreVariable(&Accessor{Name: v.Name, Expr: v.Expression, Returns: AnyReturn()}, c.Decls, environment.StoredExpressions)
		if res.Error != nil {
			c.Faults.Add(at+".expression", Fault(res.Error.Detail))
		}
	}
}

// Conditions compiles conditions as booleans, the i-th at
// field[i].expression, and returns those that compiled.
func (c Fields) Conditions(conditions []admissionregistrationv1.MatchCondition, field string) []Program {
	var out []Program
	for i, mc := range conditions {
		at := fmt.Sprintf("%s[%d].expression", field, i)
		if p := c.Program(&Accessor{Name: mc.Name, Expr: mc.Expression, Returns: BoolReturn()}, at); p != nil {
			out = append(out, Program{Expr: mc.Expression, Prog: p})
		}
	}
	return out
}
