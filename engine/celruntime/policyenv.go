package celruntime

import (
	"fmt"
	"slices"
	"sync"

	"github.com/google/cel-go/common/types/ref"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiserver/pkg/cel/environment"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/review"
)

// Annotation is a compiled auditAnnotation: its key and value expression.
type Annotation struct {
	Key string
	Program
}

var (
	vpolEnvOnce sync.Once
	vpolEnv     *environment.EnvSet
	vpolEnvErr  error
)

// PolicyCompiler compiles the expressions of every policies.kyverno.io
// policy and exception in celPolicyEnv.
var PolicyCompiler = sync.OnceValues(func() (*EnvCompiler, error) {
	env, err := PolicyEnv()
	if err != nil {
		return nil, err
	}
	return NewEnvCompiler(env, true)
})

// PolicyEnv is the environment of policies.kyverno.io policies: VAP's,
// with the lenient orValue validate.cel has, and Kyverno's libraries.
func PolicyEnv() (*environment.EnvSet, error) {
	vpolEnvOnce.Do(func() {
		var base *environment.EnvSet
		if base, _, vpolEnvErr = Env(); vpolEnvErr == nil {
			vpolEnv, vpolEnvErr = withKyvernoLibraries(base)
		}
	})
	return vpolEnv, vpolEnvErr
}

// ValidationAction checks the validationActions and evaluation mode of a
// ValidatingPolicy or ImageValidatingPolicy and returns the action charter
// takes: Enforce when Deny is among them (the default, [Deny], when none is
// set), Audit otherwise.
func ValidationAction(actions []admissionregistrationv1.ValidationAction, eval *policiesv1.EvaluationConfiguration, f *fault.Collector) review.Action {
	for i, a := range actions {
		switch a {
		case admissionregistrationv1.Deny, admissionregistrationv1.Audit, admissionregistrationv1.Warn:
		default:
			f.Add(fmt.Sprintf("spec.validationActions[%d]", i), fmt.Sprintf("unknown action %q, want Deny, Audit or Warn", a))
		}
	}
	if eval != nil && eval.Mode != "" && eval.Mode != policiesv1.EvaluationModeKubernetes {
		f.Add("spec.evaluation.mode", fmt.Sprintf("evaluation mode %q is not supported by charter (only Kubernetes)", eval.Mode))
	}
	if len(actions) == 0 || slices.Contains(actions, admissionregistrationv1.Deny) {
		return review.Enforce
	}
	return review.Audit
}

// PolicyActivation adds the library receivers and exceptions to a CEL
// activation.
type PolicyActivation struct {
	Activation
	Libs       *LibReceivers
	Exceptions ref.Val
}

func (a *PolicyActivation) ResolveName(name string) (any, bool) {
	if v, ok := a.Libs.resolve(name); ok {
		return v, true
	}
	if name == exceptionsVar {
		return a.Exceptions, true
	}
	return a.Activation.ResolveName(name)
}

// Rule names of CEL policy results other than the policy's own "".
const (
	RuleException  = "exception"
	RuleEvaluation = "evaluation"
)
