package cpol

import (
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/podsecurity"
	"github.com/charter-dev/charter/engine/review"
)

// podSecurity evaluates a validate.podSecurity rule: the Pod (or the Pod
// template of a controller) against the Pod Security Standards profile,
// minus the rule's exclusions and those of matching PolicyExceptions.
func (vd *validator) podSecurity(ps *kyvernov1.PodSecurity, resource map[string]any) review.Outcome {
	meta, spec, ok, err := podsecurity.PodTemplate(resource)
	if err != nil {
		return review.Errored("failed to read the Pod spec", err)
	}
	if !ok {
		return review.Pass("Validation rule '" + vd.rule.name + "' passed.")
	}
	excludes := make([]podsecurity.Exclude, 0, len(ps.Exclude))
	for _, e := range ps.Exclude {
		excludes = append(excludes, toExclude(e))
	}
	without, err := podsecurity.Evaluate(meta, spec, string(ps.Level), ps.Version, excludes)
	if err != nil {
		return review.Errored("failed to evaluate podSecurity", err)
	}
	result := without
	var used []*Exception
	if !without.Allowed() {
		for _, ex := range vd.exceptions {
			for _, e := range ex.src.Spec.PodSecurity {
				excludes = append(excludes, toExclude(e))
			}
			used = append(used, ex)
		}
		if len(used) > 0 {
			if result, err = podsecurity.Evaluate(meta, spec, string(ps.Level), ps.Version, excludes); err != nil {
				return review.Errored("failed to evaluate podSecurity", err)
			}
		}
	}
	props := map[string]string{"standard": string(ps.Level), "version": result.Version}
	if result.Allowed() {
		if len(used) > 0 {
			o := review.Skip("rule is skipped due to policy exceptions " + exceptionKeys(used))
			o.Exceptions, o.Props = exceptionSources(used), props
			return o
		}
		o := review.Pass(result.Message(vd.rule.name))
		o.Props = props
		return o
	}
	o := review.Fail(result.Message(vd.rule.name))
	controls := make([]string, 0, len(result.Checks))
	for _, c := range result.Checks {
		controls = append(controls, c.ID)
	}
	props["controls"] = strings.Join(controls, ",")
	o.Props = props
	return o
}

func toExclude(e kyvernov1.PodSecurityStandard) podsecurity.Exclude {
	return podsecurity.Exclude{ControlName: e.ControlName, Images: e.Images, RestrictedField: e.RestrictedField, Values: e.Values}
}
