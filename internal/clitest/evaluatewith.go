package clitest

import (
	"context"
	"fmt"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// PolicyOutcome is one policy's rule responses to one resource of a
// suite under one operation: what charter convert --verify compares
// between a policy and its converted form.
type PolicyOutcome struct {
	Operation string
	// Resource is apiVersion/Kind/namespace/name.
	Resource     string
	Policy, Kind string
	// Invalid is set when the policy did not compile.
	Invalid string
	Rules   []RuleOutcome
	// Patched is the object after the policy's mutations, nil when it
	// has none.
	Patched map[string]any
}

// RuleOutcome is one rule response: pass, fail, warn, error or skip.
type RuleOutcome struct{ Name, Status, Message string }

// Replacement stands in for a suite's policies and exceptions.
type Replacement struct {
	Policies      []kyvernov1.PolicyInterface
	Exceptions    []*kyvernov2.PolicyException
	CELExceptions []*policiesv1.PolicyException
}

// EvaluateWith runs a suite's resources, with everything else the suite
// gives them (values, user info, cluster resources, namespaces), through
// the replacement's policies and exceptions instead of the suite's own;
// a nil replacement runs the suite's own. Expected results are not
// judged: the outcomes are returned.
func (r *Runner) EvaluateWith(ctx context.Context, s *Suite, repl *Replacement) ([]PolicyOutcome, error) {
	if s.Err != nil {
		return nil, s.Err
	}
	in, err := loadInputs(s, r.files)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name(), err)
	}
	if repl != nil {
		in.policies, in.exceptions, in.celExceptions, in.unsupported = repl.Policies, repl.Exceptions, repl.CELExceptions, nil
	}
	c := &compiled{}
	c.build(in, r.cache)
	if c.err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name(), c.err)
	}
	evals := evaluate(ctx, c, in, operations(s.Test), r.opts)
	out := make([]PolicyOutcome, 0, len(evals))
	for _, e := range evals {
		o := PolicyOutcome{Operation: e.Operation, Resource: e.Resource.String(), Policy: e.Policy, Kind: e.Kind, Invalid: e.Invalid, Patched: e.Patched}
		for _, rule := range e.Rules {
			o.Rules = append(o.Rules, RuleOutcome{Name: rule.Name, Status: rule.Status, Message: rule.Message})
		}
		out = append(out, o)
	}
	return out, nil
}
