package review

import (
	"fmt"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// Outcome is what a rule's (or a CEL policy's) evaluation decides, before
// it becomes a RuleResponse.
type Outcome struct {
	Status  RuleStatus
	Message string
	// Warnings are returned with the admission response.
	Warnings []string
	// Props become the response's Properties.
	Props map[string]string
	// Exceptions are PolicyExceptions that took part in the outcome.
	Exceptions []*kyvernov2.PolicyException
}

// Pass, Fail, Skip, Errorf and Errored are the outcomes of each status.
func Pass(msg string) Outcome { return Outcome{Status: StatusPass, Message: msg} }

// Fail is a failed outcome.
func Fail(msg string) Outcome { return Outcome{Status: StatusFail, Message: msg} }

// Skip is a skipped outcome.
func Skip(msg string) Outcome { return Outcome{Status: StatusSkip, Message: msg} }

// Errorf is an error outcome.
func Errorf(f string, a ...any) Outcome {
	return Outcome{Status: StatusError, Message: fmt.Sprintf(f, a...)}
}

// Errored is the error outcome of msg and err.
func Errored(msg string, err error) Outcome {
	return Outcome{Status: StatusError, Message: msg + ": " + err.Error()}
}
