package convert

import (
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/match"
)

// convertGeneration turns a generate rule's data into a GeneratingPolicy
// generation: the downstream object as a CEL variable, applied in its
// namespace with generator.Apply.
func convertGeneration(g *kyvernov1.Generation, scope *jmesScope, out *convertedRule) error {
	switch {
	case len(g.ForEachGeneration) > 0:
		return cannot("foreach has no converter yet")
	case g.Clone.Name != "" || len(g.CloneList.Kinds) > 0:
		return convertClone(g, scope, out)
	case g.RawData == nil:
		return cannot("no data")
	}
	data, err := kyvernov1.FromJSON(g.RawData)
	if err != nil {
		return err
	}
	obj, ok := data.(map[string]any)
	if !ok {
		return cannot("data is not an object")
	}
	meta := map[string]any{}
	if m, ok := obj["metadata"].(map[string]any); ok {
		for k, v := range m {
			meta[k] = v
		}
	}
	meta["name"] = g.Name
	full := map[string]any{"apiVersion": g.APIVersion, "kind": g.Kind, "metadata": meta}
	for k, v := range obj {
		if k != "metadata" {
			full[k] = v
		}
	}
	body, err := templateValue(full, scope)
	if err != nil {
		return err
	}
	ns, err := scope.operand(g.Namespace)
	if err != nil {
		return err
	}
	name := identOnly(lowerFirst(g.Kind))
	out.variables = append(out.variables, admissionregistrationv1.Variable{Name: name, Expression: formatMaps(body.s)})
	out.generations = append(out.generations, policiesv1.Generation{
		Expression: "generator.Apply(" + ns.e.s + ", [variables." + name + "])",
	})
	generateEvaluation(g, out)
	return nil
}

// convertClone turns clone (one object) and cloneList (every object of
// some kinds, by label) into reads of the source, applied in the
// downstream namespace: generator.Apply(ns, [resource.Get(...)]), a
// resource.List standing for its items.
func convertClone(g *kyvernov1.Generation, scope *jmesScope, out *convertedRule) error {
	ns, err := templateString(g.Namespace, scope)
	if err != nil {
		return wrap(err, "namespace")
	}
	var reads []string
	var name string
	if g.Clone.Name != "" {
		// generator.Apply keeps the source's name.
		if g.Name != "" && g.Name != g.Clone.Name {
			return cannot("clone of %s as %s: generator.Apply keeps the source's name", g.Clone.Name, g.Name)
		}
		if g.Kind == "" || g.APIVersion == "" {
			return cannot("clone without the kind and apiVersion of the object")
		}
		srcNS, err := templateString(g.Clone.Namespace, scope)
		if err != nil {
			return wrap(err, "clone.namespace")
		}
		srcName, err := templateString(g.Clone.Name, scope)
		if err != nil {
			return wrap(err, "clone.name")
		}
		name = "source" + identOnly(g.Kind)
		reads = append(reads, fn("resource.Get", str(g.APIVersion), str(match.ResourceForKind(g.Kind)), srcNS, srcName).s)
	} else {
		cl := g.CloneList
		srcNS, err := templateString(cl.Namespace, scope)
		if err != nil {
			return wrap(err, "cloneList.namespace")
		}
		var labels []expr
		if cl.Selector != nil {
			if len(cl.Selector.MatchExpressions) > 0 {
				return cannot("cloneList.selector.matchExpressions: resource.List selects by labels only")
			}
			labels = append(labels, labelsLiteral(cl.Selector.MatchLabels))
		}
		for _, k := range cl.Kinds {
			i := strings.LastIndex(k, "/")
			if i < 0 || strings.Contains(k, "*") {
				return cannot("cloneList kind %q: want apiVersion/Kind", k)
			}
			args := append([]expr{str(k[:i]), str(match.ResourceForKind(k[i+1:])), srcNS}, labels...)
			reads = append(reads, fn("resource.List", args...).s)
		}
		name = "sources"
	}
	out.variables = append(out.variables, admissionregistrationv1.Variable{Name: name, Expression: "[" + strings.Join(reads, ", ") + "]"})
	out.generations = append(out.generations, policiesv1.Generation{
		Expression: "generator.Apply(" + ns.s + ", variables." + name + ")",
	})
	generateEvaluation(g, out)
	return nil
}

// generateEvaluation carries synchronize, generateExisting and
// orphanDownstreamOnPolicyDelete over.
func generateEvaluation(g *kyvernov1.Generation, out *convertedRule) {
	eval := &policiesv1.GeneratingPolicyEvaluationConfiguration{}
	if g.Synchronize {
		eval.Synchronize = &policiesv1.EnabledConfiguration{Enabled: true}
	}
	if g.GenerateExisting != nil && *g.GenerateExisting {
		eval.GenerateExisting = &policiesv1.EnabledConfiguration{Enabled: true}
	}
	if g.OrphanDownstreamOnPolicyDelete {
		eval.OrphanDownstreamOnPolicyDelete = &policiesv1.EnabledConfiguration{Enabled: true}
	}
	if *eval != (policiesv1.GeneratingPolicyEvaluationConfiguration{}) {
		out.generateEval = eval
	}
}

func lowerFirst(s string) string {
	if s == "" {
		return "downstream"
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// templateValue renders a decoded JSON value as a CEL literal whose
// "{{ }}" strings are their converted expressions. A map or list whose
// members differ in type has them wrapped in dyn(): CEL literals are
// homogeneous.
func templateValue(v any, scope *jmesScope) (expr, error) {
	return renderValue(v, dynIfMixed, func(s string) (expr, error) {
		if !strings.Contains(s, "{{") {
			lit, _ := literal(s)
			return lit, nil
		}
		jv, err := scope.operand(s)
		if err != nil {
			return expr{}, err
		}
		return fn("dyn", jv.e), nil
	})
}

// renderValue renders a decoded JSON value as a CEL literal: strings
// through str, the members of each map and list through members (given
// the rendered members and their values).
func renderValue(v any, members func([]string, []any) []string, str func(string) (expr, error)) (expr, error) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		values := make([]any, len(keys))
		for i, k := range keys {
			values[i] = x[k]
		}
		rendered, err := renderMembers(values, members, str)
		if err != nil {
			return expr{}, err
		}
		entries := make([]string, len(keys))
		for i, k := range keys {
			key, _ := literal(k)
			entries[i] = key.s + ": " + rendered[i]
		}
		return atom("{" + strings.Join(entries, ", ") + "}"), nil
	case []any:
		rendered, err := renderMembers(x, members, str)
		if err != nil {
			return expr{}, err
		}
		return atom("[" + strings.Join(rendered, ", ") + "]"), nil
	case string:
		return str(x)
	}
	lit, ok := literal(v)
	if !ok {
		return expr{}, cannot("value %v", v)
	}
	return lit, nil
}

func renderMembers(values []any, members func([]string, []any) []string, str func(string) (expr, error)) ([]string, error) {
	out := make([]string, len(values))
	for i, v := range values {
		e, err := renderValue(v, members, str)
		if err != nil {
			return nil, err
		}
		out[i] = e.s
	}
	return members(out, values), nil
}

// dynIfMixed wraps members in dyn() unless they are all scalars of one
// type.
func dynIfMixed(out []string, values []any) []string {
	kinds := map[string]bool{}
	for _, v := range values {
		switch v.(type) {
		case string:
			kinds["string"] = true
		case float64, int64, int:
			kinds["number"] = true
		case bool:
			kinds["bool"] = true
		default:
			kinds["other"] = true
		}
	}
	if len(kinds) > 1 || kinds["other"] {
		for i, s := range out {
			if !strings.HasPrefix(s, "dyn(") {
				out[i] = "dyn(" + s + ")"
			}
		}
	}
	return out
}

// formatMaps lays out a map literal one entry a line, as formatObjects
// does typed literals.
func formatMaps(s string) string {
	return formatBraces(s, func(prev byte) bool { return !isIdentByte(prev) })
}

// buildGeneratingPolicy writes generate rules as a GeneratingPolicy.
func buildGeneratingPolicy(p kyvernov1.PolicyInterface, name string, rules []*convertedRule) Output {
	c := commonParts(p, name, rules)
	spec := policiesv1.GeneratingPolicySpec{
		MatchConstraints:        rules[0].matchConstraints,
		MatchConditions:         rules[0].matchConditions,
		EvaluationConfiguration: rules[0].generateEval,
		Variables:               c.variables,
		WebhookConfiguration:    c.webhook,
		UseServerSideApply:      p.GetSpec().UseServerSideApply,
	}
	for _, r := range rules {
		spec.Generation = append(spec.Generation, r.generations...)
	}
	if p.IsNamespaced() {
		return c.output(&policiesv1.NamespacedGeneratingPolicy{ObjectMeta: c.meta, Spec: spec}, "NamespacedGeneratingPolicy")
	}
	return c.output(&policiesv1.GeneratingPolicy{ObjectMeta: c.meta, Spec: spec}, "GeneratingPolicy")
}
