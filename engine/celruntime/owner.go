package celruntime

import (
	"github.com/google/cel-go/common/types/ref"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// Owner is what a CEL kind's evaluation reads of the policy the engine's
// root compiled it into: its source (kind, name, labels), the set's
// policies.kyverno.io PolicyExceptions, and whether its failures only
// warn (policies.kyverno.io/scored: "false").
type Owner struct {
	Source     kyvernov1.PolicyInterface
	Exceptions []*Exception
	Unscored   bool
}

// EvalExceptions evaluates the set's exceptions that name the owner, for
// a request acting in scope (see EvalExceptions).
func (o *Owner) EvalExceptions(e *Evaluator, scope string, anyExempts bool) (ref.Val, *Exemption, error) {
	return EvalExceptions(o.Exceptions, o.Source.GetKind(), o.Source.GetName(), e, scope, anyExempts)
}
