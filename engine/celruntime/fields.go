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

// StartVariant begins one variant of a CEL policy at path: the policy's
// own compiler, from the kind's environment env, and its compiled match
// constraints. A fault in either is reported at path; without a compiler
// (env failed) ok is false and there is nothing to compile the variant
// with.
func StartVariant(env func() (*EnvCompiler, error), mc *admissionregistrationv1.MatchResources, path string, f *fault.Collector) (compiler *Compiler, match *Constraints, ok bool) {
	envCompiler, err := env()
	if err != nil {
		f.Add(path, "CEL environment: "+err.Error())
		return nil, nil, false
	}
	if match, err = CompileConstraints(mc); err != nil {
		f.Add(path+".matchConstraints", err.Error())
	}
	return envCompiler.ForPolicy(), match, true
}

// Validations compiles the validations of a ValidatingPolicy or an
// ImageValidatingPolicy with compile, the i-th at path.validations[i],
// each as a boolean and its messageExpression as a string.
func Validations(vals []admissionregistrationv1.Validation, path string, compile func(*Accessor, string) *Program) []Expression {
	var out []Expression
	for i, val := range vals {
		field := fmt.Sprintf("%s.validations[%d]", path, i)
		ce := Expression{Program: Program{Expr: val.Expression}, Message: val.Message}
		if p := compile(&Accessor{Expr: val.Expression, Returns: BoolReturn()}, field+".expression"); p != nil {
			ce.Program = *p
		}
		if val.MessageExpression != "" {
			ce.MessageExpr = compile(&Accessor{Expr: val.MessageExpression, Returns: StringReturn()}, field+".messageExpression")
		}
		out = append(out, ce)
	}
	return out
}

// AuditAnnotations compiles the audit annotations of a ValidatingPolicy
// or an ImageValidatingPolicy with compile, the i-th at
// path.auditAnnotations[i]; a value must be a string or null.
func AuditAnnotations(anns []admissionregistrationv1.AuditAnnotation, path string, f *fault.Collector, compile func(*Accessor, string) *Program) []Annotation {
	var out []Annotation
	for i, a := range anns {
		field := fmt.Sprintf("%s.auditAnnotations[%d]", path, i)
		if a.Key == "" {
			f.Add(field+".key", "an audit annotation needs a key")
		}
		before := len(f.Errs)
		p := compile(&Accessor{Expr: a.ValueExpression, Returns: []*celgo.Type{celgo.StringType, celgo.NullType}}, field+".valueExpression")
		if len(f.Errs) > before && strings.Contains(f.Errs[before].Fault, "but got dyn") {
			// Kyverno refuses dyn here too; say how to fix it.
			f.Errs[before].Fault += " (wrap the expression in string(...))"
		}
		if p != nil {
			out = append(out, Annotation{Key: a.Key, Program: *p})
		}
	}
	return out
}
