package engine

import (
	"github.com/google/cel-go/common/types/ref"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celruntime"
)

// WithCELExceptions makes policies.kyverno.io PolicyExceptions part of the
// set. An exception acts only on requests in its own namespace
// (ExceptionOwnNamespace).
func WithCELExceptions(exceptions []*policiesv1.PolicyException) CompileOption {
	return withScopedCELExceptions(celruntime.ExceptionOwnNamespace, exceptions)
}

// withScopedCELExceptions makes policies.kyverno.io PolicyExceptions part
// of the set, acting in scope: the controllers compile the exceptions of
// trusted namespaces with ExceptionAnyNamespace.
func withScopedCELExceptions(scope celruntime.ExceptionScope, exceptions []*policiesv1.PolicyException) CompileOption {
	return func(c *compileConfig) {
		for _, ex := range exceptions {
			c.celExceptions = append(c.celExceptions, scopedCELException{src: ex, scope: scope})
		}
	}
}

// celExceptions evaluates the exceptions that name the policy, before its
// matchConditions: one without images or allowedValues whose conditions
// hold exempts the request; the others contribute their lists to
// exceptions.allowedImages and exceptions.allowedValues.
func (p *Policy) celExceptions(e *celruntime.Evaluator, in *requestView) (ref.Val, *celruntime.Exemption, error) {
	own := p.owner()
	return own.EvalExceptions(e, in.Scope, false)
}

// owner is what a CEL kind's evaluation reads of the policy.
func (p *Policy) owner() celruntime.Owner {
	return celruntime.Owner{Source: p.source, Exceptions: p.set.celExceptions, Unscored: p.unscored}
}
