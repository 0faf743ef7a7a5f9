package engine

import (
	"fmt"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/match"
)

// exception is a compiled PolicyException.
type exception struct {
	src        *kyvernov2.PolicyException
	key        string
	match      kyvernov1.MatchResources
	conditions *conditionBlock
}

const exceptionKind = "PolicyException"

func (s *ruleCompiler) compileException(src *kyvernov2.PolicyException) (*exception, fault.List) {
	key := src.Name
	if src.Namespace != "" {
		key = src.Namespace + "/" + src.Name
	}
	f := &fault.Collector{Kind: exceptionKind, Name: key}
	if len(src.Spec.Exceptions) == 0 {
		f.Add("spec.exceptions", "an exception needs at least one policy")
	}
	for i, e := range src.Spec.Exceptions {
		if e.PolicyName == "" {
			f.Add(fmt.Sprintf("spec.exceptions[%d].policyName", i), "an exception requires a policy name")
		}
		if len(e.RuleNames) == 0 {
			f.Add(fmt.Sprintf("spec.exceptions[%d].ruleNames", i), "an exception requires at least one rule name")
		}
	}
	if src.Spec.Match.IsEmpty() {
		f.Add("spec.match", "an exception needs match with at least one resource filter")
	}
	checkExceptionSpec(&src.Spec, f)
	ex := &exception{src: src, key: key, match: src.Spec.Match.V1()}
	ex.conditions = compileConditions(src.Spec.Conditions, "spec.conditions", f)
	if len(f.Errs) > 0 {
		return nil, f.Errs
	}
	return ex, nil
}

// exceptions returns the exceptions that cover the rule for this request:
// they name the policy and rule, their match selects the resource, and
// their conditions hold.
func (ev *evaluation) exceptions(doc *jsoncontext.Document, r *rule) ([]*exception, error) {
	var out []*exception
	for _, ex := range ev.set.exceptions {
		if !ex.src.Spec.Contains(ev.policy.key, r.name) {
			continue
		}
		if !match.Matches(&ex.match, &ev.in.Res) {
			continue
		}
		ok, _, err := ev.conditions(doc, ex.conditions)
		if err != nil {
			return nil, fmt.Errorf("PolicyException %s: %w", ex.key, err)
		}
		if ok {
			out = append(out, ex)
		}
	}
	return out, nil
}

// exceptionsArePodSecurity reports whether the exceptions only exempt Pod
// Security controls of a podSecurity rule; those narrow the check instead
// of skipping the rule.
func exceptionsArePodSecurity(exs []*exception, r *rule) bool {
	if r.validate == nil || r.validate.podSecurity == nil {
		return false
	}
	for _, ex := range exs {
		if len(ex.src.Spec.PodSecurity) == 0 {
			return false
		}
	}
	return true
}

func exceptionSources(exs []*exception) []*kyvernov2.PolicyException {
	out := make([]*kyvernov2.PolicyException, len(exs))
	for i, ex := range exs {
		out[i] = ex.src
	}
	return out
}

// exceptionKeys joins the exceptions' namespace/name keys the way Kyverno's
// skip message does (directly after "exceptions", no space).
func exceptionKeys(exs []*exception) string {
	keys := make([]string, len(exs))
	for i, ex := range exs {
		keys[i] = ex.key
	}
	return strings.Join(keys, ", ")
}
