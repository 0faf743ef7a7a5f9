package celruntime

import (
	"strings"
	"sync"

	celgo "github.com/google/cel-go/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/charter-dev/charter/engine/celenv"
)

// Program is one compiled expression: its source and its program.
type Program struct {
	Expr string
	Prog celgo.Program
	// Untracked is the program without runtime cost tracking, for a
	// ValidatingPolicy variant bounded at the request's input size
	// (celcost.go); nil otherwise.
	Untracked celgo.Program
}

// Expression is a validation: its program and its message, or the
// compiled messageExpression that gives the message.
type Expression struct {
	Program
	Message string
	// MessageExpr is the compiled messageExpression, if any.
	MessageExpr *Program
}

// Accessor is an expression handed to the apiserver compiler, with the
// types it must return.
type Accessor struct {
	Name, Expr string
	Returns    []*celgo.Type
}

// GetExpression, ReturnTypes and GetName make an Accessor the
// apiserver compiler's ExpressionAccessor.
func (a *Accessor) GetExpression() string { return a.Expr }

// ReturnTypes are the types the expression may return.
func (a *Accessor) ReturnTypes() []*celgo.Type { return a.Returns }

// GetName is the expression's name (a variable's, a condition's).
func (a *Accessor) GetName() string { return a.Name }

// BoolReturn, StringReturn and AnyReturn are the return types of a
// condition, a message and a variable.
func BoolReturn() []*celgo.Type { return []*celgo.Type{celgo.BoolType} }

// StringReturn is the return type of a message.
func StringReturn() []*celgo.Type { return []*celgo.Type{celgo.StringType} }

// AnyReturn is the return type of a variable.
func AnyReturn() []*celgo.Type { return []*celgo.Type{celgo.AnyType} }

// The base environment is built on first use: policy sets without CEL
// rules never pay for it. celRuleCompiler compiles every validate.cel rule
// in it.
var (
	celEnvOnce      sync.Once
	celBaseEnv      *environment.EnvSet
	celRuleCompiler *EnvCompiler
	celEnvErr       error
)

// Env is the base environment (VAP's, with the lenient orValue) and the
// compiler of ClusterPolicy validate.cel rules in it, built once.
func Env() (*environment.EnvSet, *EnvCompiler, error) {
	celEnvOnce.Do(func() {
		celBaseEnv, celEnvErr = celenv.WithLenientOrValue(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
		if celEnvErr == nil {
			celRuleCompiler, celEnvErr = NewEnvCompiler(celBaseEnv, false)
		}
	})
	return celBaseEnv, celRuleCompiler, celEnvErr
}

// Fault is a compile error on one line: CEL's report quotes the
// expression under each error with a caret, which the position already
// gives and which a one-line fault (status conditions, CLI warnings)
// cannot show.
func Fault(detail string) string {
	var kept []string
	for _, line := range strings.Split(detail, "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "|") {
			kept = append(kept, t)
		}
	}
	return strings.Join(kept, "; ")
}
