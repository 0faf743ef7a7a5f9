package cpol

import (
	"fmt"
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/jsoncontext"
	"github.com/charter-dev/charter/engine/match"
)

// Exception is a compiled PolicyException.
type Exception struct {
	src        *kyvernov2.PolicyException
	Key        string
	match      kyvernov1.MatchResources
	conditions *ConditionBlock
}

const exceptionKind = "PolicyException"

func (s *Compiler) CompileException(src *kyvernov2.PolicyException) (*Exception, fault.List) {
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
	ex := &Exception{src: src, Key: key, match: src.Spec.Match.V1()}
	ex.conditions = CompileConditions(src.Spec.Conditions, "spec.conditions", f)
	if len(f.Errs) > 0 {
		return nil, f.Errs
	}
	return ex, nil
}

// Exceptions returns the exceptions that cover the rule for this request:
// they name the policy and rule, their match selects the resource, and
// their conditions hold.
func (ev *evaluation) exceptions(doc *jsoncontext.Document, r *rule) ([]*Exception, error) {
	var out []*Exception
	for _, ex := range ev.env.Exceptions {
		if !ex.src.Spec.Contains(ev.policy.key, r.name) {
			continue
		}
		if !match.Matches(&ex.match, &ev.in.Res) {
			continue
		}
		ok, _, err := ev.conditions(doc, ex.conditions)
		if err != nil {
			return nil, fmt.Errorf("PolicyException %s: %w", ex.Key, err)
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
func exceptionsArePodSecurity(exs []*Exception, r *rule) bool {
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

func exceptionSources(exs []*Exception) []*kyvernov2.PolicyException {
	out := make([]*kyvernov2.PolicyException, len(exs))
	for i, ex := range exs {
		out[i] = ex.src
	}
	return out
}

// exceptionKeys joins the exceptions' namespace/name keys the way Kyverno's
// skip message does (directly after "exceptions", no space).
func exceptionKeys(exs []*Exception) string {
	keys := make([]string, len(exs))
	for i, ex := range exs {
		keys[i] = ex.Key
	}
	return strings.Join(keys, ", ")
}
