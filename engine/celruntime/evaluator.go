package celruntime

import (
	"errors"
	"fmt"
	"math"
	"strings"

	celgo "github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// ErrBudget is the error of an evaluation past its runtime cost budget.
var ErrBudget = errors.New("validation failed due to running out of cost budget, no further validation rules will be run")

// Evaluator runs one rule's programs against one activation within the
// rule's runtime cost budget (VAP's per-policy budget).
type Evaluator struct {
	// ctx charges the variables of k8s' lazy map (celComposition); nil
	// when variables are a celVariables, which charges variablesCost.
	Ctx    plugincel.CompositionContext
	Act    interpreter.Activation
	Budget int64
	// variablesCost is what celVariables evaluated since the last eval.
	variablesCost int64
	// untracked runs the programs' untracked plans: the variant is
	// bounded at the request's input size (celcost.go), so no program
	// can exceed its limits and none is charged.
	Untracked bool
}

// Eval runs a program. It is Eval, not ContextEval: ContextEval makes a
// cancellable context per call (two allocations, over fifty a review for
// the Pod Security set as ValidatingPolicies) only so that a cancelled
// request interrupts a comprehension. What bounds an expression is the
// cost limit, which Eval enforces too (per call, and the budget here
// across the policy's expressions).
func (e *Evaluator) Eval(p *Program) (ref.Val, error) {
	if e.Untracked && p.Untracked != nil {
		val, _, err := p.Untracked.Eval(e.Act)
		e.variablesCost = 0
		if err != nil {
			return nil, err
		}
		return val, nil
	}
	val, details, err := p.Prog.Eval(e.Act)
	// Variables are evaluated lazily and charge their cost to the context
	// (or to variablesCost, celVariables).
	cost := e.variablesCost
	if e.Ctx != nil {
		cost += e.Ctx.GetAndResetCost()
	}
	e.variablesCost = 0
	cost += actualCost(details)
	e.Budget -= cost
	if e.Budget < 0 {
		return nil, ErrBudget
	}
	if err != nil {
		return nil, err
	}
	return val, nil
}

// actualCost is what an evaluation cost, by its details.
func actualCost(details *celgo.EvalDetails) int64 {
	if details == nil || details.ActualCost() == nil {
		return 0
	}
	return int64(min(*details.ActualCost(), math.MaxInt64))
}

// Message is VAP's failure message: messageExpression's result when it
// evaluates to a non-blank single-line string within the size limit, else
// message, else "failed expression: <expression>".
func (e *Evaluator) Message(x *Expression) string {
	if x.MessageExpr != nil {
		if val, err := e.Eval(x.MessageExpr); err == nil {
			if s, ok := val.Value().(string); ok {
				s = strings.TrimSpace(s)
				if s != "" && len(s) <= celconfig.MaxEvaluatedMessageExpressionSizeBytes && !strings.Contains(s, "\n") {
					return s
				}
			}
		}
	}
	if m := strings.TrimSpace(x.Message); m != "" {
		return m
	}
	return "failed expression: " + strings.TrimSpace(x.Expr)
}

// vpolMessage is Kyverno's failure message for a ValidatingPolicy: the
// messageExpression's value, else message, else the validation's index.
func (e *Evaluator) ValidationMessage(x *Expression, i int) string {
	if x.MessageExpr != nil {
		val, err := e.Eval(x.MessageExpr)
		if err != nil {
			return "failed to evaluate message expression: " + err.Error()
		}
		s, ok := val.(types.String)
		if !ok {
			return fmt.Sprintf("failed to convert message expression to string: %v", val)
		}
		return string(s)
	}
	if x.Message != "" {
		return x.Message
	}
	return fmt.Sprintf("CEL expression validation failed at index %d", i)
}
