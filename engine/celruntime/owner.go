package celruntime

import (
	"github.com/google/cel-go/common/types/ref"
)

// Owner is what a CEL kind's evaluation reads of the policy the engine's
// root compiled it into: its source (kind, name, labels), the set's
// policies.kyverno.io PolicyExceptions, and whether its failures only
// warn (policies.kyverno.io/scored: "false").
type Owner struct {
	Source     Source
	Exceptions []*Exception
	Unscored   bool
}

// Source is what an evaluation reads of the policy object itself: the
// kind and name exceptions name it by, the labels (charter.dev/staged).
type Source interface {
	GetKind() string
	GetName() string
	GetLabels() map[string]string
}

// EvalExceptions evaluates the set's exceptions that name the owner, for
// a request acting in scope (see EvalExceptions).
func (o *Owner) EvalExceptions(e *Evaluator, scope string, anyExempts bool) (ref.Val, *Exemption, error) {
	return EvalExceptions(o.Exceptions, o.Source.GetKind(), o.Source.GetName(), e, scope, anyExempts)
}
