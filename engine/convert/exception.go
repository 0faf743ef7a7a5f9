package convert

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/wildcard"
)

// ConvertException translates a kyverno.io PolicyException into a
// policies.kyverno.io one that names the converted policies holding the
// exempted rules (results, keyed by Key). A converted policy holds every
// rule it is named after only: an exception of some of its rules would
// exempt them all, so it does not convert.
func ConvertException(ex *kyvernov2.PolicyException, results map[string]*Result) *Result {
	res := &Result{Exception: ex}
	problem := func(format string, args ...any) {
		res.Problems = append(res.Problems, Problem{Reason: fmt.Sprintf(format, args...)})
	}
	if len(ex.Spec.PodSecurity) > 0 {
		problem("podSecurity exemptions have no CEL form")
	}
	var refs []policiesv1.PolicyRef
	for _, e := range ex.Spec.Exceptions {
		r := sourceFor(e.PolicyName, results)
		if r == nil {
			problem("policy %s is not among the converted policies", e.PolicyName)
			continue
		}
		for _, o := range r.Outputs {
			var exempted []string
			for _, rule := range o.Rules {
				if slices.ContainsFunc(e.RuleNames, func(n string) bool { return wildcard.Match(n, rule) || wildcard.Match(n, "autogen-"+rule) }) {
					exempted = append(exempted, rule)
				}
			}
			switch {
			case len(exempted) == 0:
			case len(exempted) < len(o.Rules):
				problem("%s exempts rules %s of %s %s, which also holds %s", e.PolicyName, strings.Join(exempted, ", "), o.Kind, o.Name, strings.Join(without(o.Rules, exempted), ", "))
			default:
				refs = append(refs, policiesv1.PolicyRef{Name: o.Name, Kind: o.Kind})
			}
		}
	}
	scope := &jmesScope{variables: map[string]bool{}, vars: &iterNames{}}
	var conds []admissionregistrationv1.MatchCondition
	match := ex.Spec.Match.V1()
	fs, all := match.Filters()
	var parts []expr
	for _, f := range fs {
		e, err := filterCondition(f)
		if err != nil {
			problem("match: %s", err)
			continue
		}
		parts = append(parts, e)
	}
	if len(parts) > 0 {
		m := or(parts...)
		if all {
			m = and(parts...)
		}
		conds = append(conds, admissionregistrationv1.MatchCondition{Name: "match", Expression: layout(m.s)})
	}
	if ex.Spec.Conditions != nil {
		c, err := scope.conditions(ex.Spec.Conditions)
		if err != nil {
			problem("conditions: %s", err)
		} else if !c.isTrue() {
			conds = append(conds, admissionregistrationv1.MatchCondition{Name: "conditions", Expression: layout(c.s)})
		}
	}
	if len(res.Problems) > 0 {
		return res
	}
	out := &policiesv1.PolicyException{
		ObjectMeta: metav1.ObjectMeta{Name: ex.Name, Namespace: ex.Namespace, Labels: ex.Labels, Annotations: ex.Annotations},
		Spec:       policiesv1.PolicyExceptionSpec{PolicyRefs: refs, MatchConditions: conds},
	}
	out.APIVersion, out.Kind = policiesv1.GroupVersion.String(), "PolicyException"
	res.Outputs = []Output{{Object: out, Name: out.Name, Kind: out.Kind}}
	return res
}

func without(all, some []string) []string {
	var out []string
	for _, a := range all {
		if !slices.Contains(some, a) {
			out = append(out, a)
		}
	}
	return out
}

// sourceFor finds the converted policy an exception names: name for a
// ClusterPolicy, namespace/name for a Policy.
func sourceFor(name string, results map[string]*Result) *Result {
	if ns, n, ok := strings.Cut(name, "/"); ok {
		return results["Policy/"+ns+"/"+n]
	}
	return results["ClusterPolicy//"+name]
}

// filterCondition is a resource filter as a CEL test of the request.
func filterCondition(f kyvernov1.ResourceFilter) (expr, error) {
	d := f.ResourceDescription
	var parts []expr
	if len(d.Kinds) > 0 {
		var kinds []string
		for _, k := range d.Kinds {
			kinds = append(kinds, lastPart(k))
		}
		parts = append(parts, anyGlob(atom("request.kind.kind"), kinds))
	}
	if len(d.Namespaces) > 0 {
		parts = append(parts, anyGlob(atom("request.namespace"), d.Namespaces))
	}
	names := d.Names
	if d.Name != "" {
		names = append(names, d.Name)
	}
	if len(names) > 0 {
		parts = append(parts, anyGlob(atom("object.metadata.name"), names))
	}
	if len(d.Operations) > 0 {
		var ops []string
		for _, o := range d.Operations {
			ops = append(ops, string(o))
		}
		parts = append(parts, anyGlob(atom("request.operation"), ops))
	}
	if d.Selector != nil {
		if len(d.Selector.MatchExpressions) > 0 || hasWildcardSelector(d.Selector) {
			return expr{}, cannot("selector with expressions or wildcards")
		}
		for _, k := range sortedKeys(d.Selector.MatchLabels) {
			labels := atom("object.metadata.labels")
			parts = append(parts, and(fn("has", labels), has(labels, k), rel(field(labels, k), "==", str(d.Selector.MatchLabels[k]))))
		}
	}
	if len(d.Annotations) > 0 {
		parts = append(parts, annotationsCondition(d.Annotations))
	}
	if d.NamespaceSelector != nil {
		return expr{}, cannot("namespaceSelector")
	}
	if !f.UserInfo.IsEmpty() {
		c, err := userCondition(f.UserInfo)
		if err != nil {
			return expr{}, err
		}
		parts = append(parts, c)
	}
	return and(parts...), nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// annotationsCondition tests that the object has every annotation, its
// value matching the wildcard given.
func annotationsCondition(want map[string]string) expr {
	annotations := atom("object.metadata.annotations")
	parts := []expr{fn("has", annotations)}
	for _, k := range sortedKeys(want) {
		if wildcard.ContainsWildcard(k) {
			parts = append(parts, macro(annotations, "exists", "key", and(globExpr(atom("key"), k), globExpr(atom("object.metadata.annotations[key]"), want[k]))))
			continue
		}
		parts = append(parts, has(annotations, k), globExpr(field(annotations, k), want[k]))
	}
	return and(parts...)
}
