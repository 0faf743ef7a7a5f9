package convert

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

func convertRule(p kyvernov1.PolicyInterface, r *kyvernov1.Rule) (*convertedRule, error) {
	switch {
	case r.Mutation != nil && r.Mutation.IsMutateExisting() && p.GetSpec().RuleMutateExistingOnPolicyUpdate(r):
		return nil, cannot("mutateExistingOnPolicyUpdate: a MutatingPolicy patches its targets on requests only")
	case r.Mutation != nil, r.Generation != nil:
	case len(r.VerifyImages) > 0:
		if len(r.Context) > 0 {
			return nil, cannot("context: a verifyImages rule's context feeds variables into its attestors, which an ImageValidatingPolicy's attestors cannot read")
		}
	case r.Validation == nil:
		return nil, cannot("no validate, mutate, generate or verifyImages")
	}
	out := &convertedRule{name: r.Name}
	if r.Validation != nil {
		actions, err := actionsFor(p, r)
		if err != nil {
			return nil, err
		}
		out.actions = actions
	}
	if len(r.VerifyImages) > 0 {
		out.actions = imageActions(p, r)
	}
	kinds, err := matchConstraints(r, out)
	if err != nil {
		return nil, err
	}
	scope := &jmesScope{variables: map[string]bool{}, vars: &iterNames{}, operations: matchedOperations(out.matchConstraints)}
	for _, c := range r.Context {
		if err := contextVariable(c, scope, out); err != nil {
			return nil, wrap(err, "context %s", c.Name)
		}
	}
	for _, mc := range r.CELPreconditions {
		out.matchConditions = append(out.matchConditions, mc)
	}
	if r.RawAnyAllConditions != nil {
		raw, err := kyvernov1.FromJSON(r.RawAnyAllConditions)
		if err != nil {
			return nil, err
		}
		// A MutatingPolicy's matchConditions see its variables; a
		// ValidatingPolicy's do not.
		if r.Mutation == nil && len(scope.variables) > 0 && usesAny(raw, scope.variables) {
			return nil, cannot("preconditions read context variables, which matchConditions cannot see")
		}
		pre, err := scope.rawConditions(raw)
		if err != nil {
			return nil, wrap(err, "preconditions")
		}
		addCondition(out, "preconditions", pre)
	}
	if len(r.VerifyImages) > 0 {
		if err := convertVerifyImages(r, out); err != nil {
			return nil, wrap(err, "verifyImages")
		}
		return out, nil
	}
	podOnly := len(kinds) > 0
	for _, k := range kinds {
		podOnly = podOnly && k == "Pod"
	}
	// Every object has metadata, but the template a Pod rule reads in a
	// controller (autogen) may not.
	pt := &patternTranslator{present: map[string]bool{"metadata": !podOnly}, vars: scope.vars}
	if podOnly {
		pt.present["spec"], pt.present["spec.containers"] = true, true
	}
	if r.Generation != nil {
		out.kind = "generate"
		if err := convertGeneration(r.Generation, scope, out); err != nil {
			return nil, wrap(err, "generate")
		}
		return out, nil
	}
	if r.Mutation != nil {
		out.mutate = true
		if r.Mutation.IsMutateExisting() {
			// The patches apply to each target, which the CEL policy
			// reads as object.
			targets, err := mutateTargets(r.Mutation.Targets, scope)
			if err != nil {
				return nil, wrap(err, "mutate.targets")
			}
			out.targets = targets
			if len(out.matchConditions) > 0 {
				return nil, cannot("mutate.targets with preconditions or match filters that become matchConditions: a MutatingPolicy judges each target by them too")
			}
			if hasVariables(r.Mutation.RawPatchStrategicMerge) || strings.Contains(r.Mutation.PatchesJSON6902, "{{") || len(r.Mutation.ForEachMutation) > 0 {
				return nil, cannot("mutate.targets with a patch that holds variables or a foreach: in the CEL policy object is the target, not the trigger")
			}
			pt.present = map[string]bool{"metadata": true}
		}
		mutations, err := convertMutation(r.Mutation, scope, pt.present)
		if err != nil {
			return nil, err
		}
		out.mutations = mutations
		return out, nil
	}
	v := r.Validation
	message, notes := messageFor(v.Message, scope)
	out.notes = append(out.notes, notes...)
	var result outcome
	switch {
	case v.CEL != nil:
		if v.CEL.ParamKind != nil || v.CEL.ParamRef != nil {
			return nil, cannot("validate.cel.paramKind: the CEL kinds have no params")
		}
		out.variables = append(out.variables, v.CEL.Variables...)
		out.validations = append(out.validations, v.CEL.Expressions...)
		out.auditAnnotations = append(out.auditAnnotations, v.CEL.AuditAnnotations...)
		return out, nil
	case v.PodSecurity != nil:
		if err := podSecurity(v.PodSecurity, string(v.PodSecurity.Level), out); err != nil {
			return nil, wrap(err, "validate.podSecurity")
		}
		return out, nil
	case v.Manifests != nil:
		return nil, cannot("validate.manifests: the CEL kinds do not verify signed manifests")
	case v.Assert != nil:
		return nil, cannot("validate.assert: kyverno-json assertion trees have no CEL form here")
	case v.Deny != nil:
		raw, err := kyvernov1.FromJSON(v.Deny.RawAnyAllConditions)
		if err != nil {
			return nil, err
		}
		scope.shareRepeatedKeys(raw, out)
		denied, err := scope.rawConditions(raw)
		if err != nil {
			return nil, wrap(err, "deny")
		}
		result = outcome{cond: celTrue, check: not(denied)}
	case v.RawPattern != nil:
		pat, err := kyvernov1.FromJSON(v.RawPattern)
		if err == nil {
			pat, err = withNameValues(pat, scope)
		}
		if err != nil {
			return nil, err
		}
		if hasVariables(pat) {
			return nil, cannot("pattern holds variables")
		}
		result, err = pt.translate(pat, atom("object"), "")
		if err != nil {
			return nil, wrap(err, "pattern")
		}
	case v.RawAnyPattern != nil:
		raw, err := kyvernov1.FromJSON(v.RawAnyPattern)
		if err != nil {
			return nil, err
		}
		result, err = anyPattern(pt, raw, atom("object"), "")
		if err != nil {
			return nil, wrap(err, "anyPattern")
		}
	case len(v.ForEachValidation) > 0:
		result, err = foreach(pt, scope, v.ForEachValidation, out)
		if err != nil {
			return nil, wrap(err, "foreach")
		}
	default:
		return nil, cannot("validate has no pattern, anyPattern, deny, foreach or cel")
	}
	if !result.cond.isTrue() {
		addCondition(out, "applies", result.cond)
	}
	val := admissionregistrationv1.Validation{Expression: layout(result.check.s)}
	if message.isExpr {
		val.MessageExpression = message.text
	} else {
		val.Message = message.text
	}
	out.validations = append(out.validations, val)
	requestVariables(out)
	return out, nil
}

// requestVariables records the built-in variables Kyverno derives from the
// request (serviceAccountName) that the rule reads, whose suite values
// the verifier feeds in place of their CEL, as it does a context entry's.
func requestVariables(out *convertedRule) {
	var texts []string
	for _, c := range out.matchConditions {
		texts = append(texts, c.Expression)
	}
	for _, v := range out.validations {
		texts = append(texts, v.Expression)
	}
	if strings.Contains(strings.Join(texts, "\n"), serviceAccountNameCEL) {
		out.clusterReads = append(out.clusterReads, ClusterRead{Rule: out.name, Variable: "serviceAccountName", Inline: serviceAccountNameCEL})
	}
}

func addCondition(out *convertedRule, name string, e expr) {
	if e.isTrue() {
		return
	}
	out.matchConditions = append(out.matchConditions, admissionregistrationv1.MatchCondition{Name: name, Expression: layout(e.s)})
}

func usesAny(raw any, names map[string]bool) bool {
	b, _ := json.Marshal(raw)
	for n := range names {
		if strings.Contains(string(b), n) {
			return true
		}
	}
	return false
}

func hasVariables(pat any) bool {
	b, _ := json.Marshal(pat)
	return strings.Contains(string(b), "{{") || strings.Contains(string(b), "$(")
}

// contextVariable converts a context entry that is a plain variable
// (jmesPath or value) into a CEL variable; other entries read the cluster
// and are refused.
func contextVariable(c kyvernov1.ContextEntry, scope *jmesScope, out *convertedRule) error {
	switch {
	case c.Variable != nil:
	case c.ConfigMap != nil:
		e, err := configMapRead(c.ConfigMap, scope)
		if err != nil {
			return err
		}
		return clusterVariable(c.Name, jmesValue{e: e}, scope, out)
	case c.APICall != nil:
		v, err := apiCallRead(c.APICall, scope)
		if err != nil {
			return err
		}
		return clusterVariable(c.Name, v, scope, out)
	case c.ImageRegistry != nil:
		return cannot("imageRegistry context entries have no converter yet")
	case c.GlobalReference != nil:
		return cannot("globalReference context entries have no converter yet")
	default:
		return cannot("empty context entry")
	}
	v := c.Variable
	if !isIdent(c.Name) {
		return cannot("name is not a CEL identifier")
	}
	var e expr
	switch {
	case v.JMESPath != "" && v.Value == nil:
		jv, err := scope.convert(v.JMESPath)
		if err != nil {
			return err
		}
		e = jv.e
	case v.JMESPath == "" && v.Value != nil:
		raw, err := kyvernov1.FromJSON(v.Value)
		if err != nil {
			return err
		}
		jv, err := scope.operand(raw)
		if err != nil {
			return err
		}
		e = jv.e
	default:
		return cannot("a variable with both value and jmesPath, or a default")
	}
	scope.variables[c.Name] = true
	out.variables = append(out.variables, admissionregistrationv1.Variable{Name: c.Name, Expression: e.s})
	return nil
}

func anyPattern(pt *patternTranslator, raw any, v expr, p string) (outcome, error) {
	list, ok := raw.([]any)
	if !ok || len(list) == 0 {
		return outcome{}, cannot("anyPattern is not a list of patterns")
	}
	var conds, passes []expr
	for _, pat := range list {
		if hasVariables(pat) {
			return outcome{}, cannot("pattern holds variables")
		}
		o, err := pt.translate(pat, v, p)
		if err != nil {
			return outcome{}, err
		}
		conds = append(conds, o.cond)
		passes = append(passes, o.pass())
	}
	return outcome{cond: or(conds...), check: or(passes...)}, nil
}

// foreach converts validate.foreach entries: each applies to the elements
// of its list; an element that skips (unmet preconditions or conditional
// anchors) is ignored, and an entry whose list is missing or empty skips.
func foreach(pt *patternTranslator, scope *jmesScope, entries []kyvernov1.ForEachValidation, out *convertedRule) (outcome, error) {
	var conds, checks []expr
	for i, fe := range entries {
		if fe.ForEachValidation != nil {
			return outcome{}, cannot("entry %d: nested foreach", i)
		}
		if fe.ElementScope != nil && !*fe.ElementScope {
			return outcome{}, cannot("entry %d: elementScope false", i)
		}
		list, always, err := foreachList(scope, pt, fe.List)
		if err != nil {
			return outcome{}, wrap(err, "entry %d list", i)
		}
		x := pt.vars.name(fe.List)
		inner := &jmesScope{element: x, variables: scope.variables, vars: scope.vars, cluster: scope.cluster, lists: scope.lists}
		binds, err := elementContext(fe.Context, inner, out)
		if err != nil {
			pt.vars.release(x)
			return outcome{}, wrap(err, "entry %d context", i)
		}
		elem := outcome{cond: celTrue, check: celTrue}
		if fe.AnyAllConditions != nil {
			pre, err := inner.conditions(fe.AnyAllConditions)
			if err != nil {
				pt.vars.release(x)
				return outcome{}, wrap(err, "entry %d preconditions", i)
			}
			elem.cond = pre
		}
		var body outcome
		switch {
		case fe.Deny != nil:
			raw, err := kyvernov1.FromJSON(fe.Deny.RawAnyAllConditions)
			if err == nil {
				var denied expr
				denied, err = inner.rawConditions(raw)
				body = outcome{cond: celTrue, check: not(denied)}
			}
			if err != nil {
				pt.vars.release(x)
				return outcome{}, wrap(err, "entry %d deny", i)
			}
		case fe.RawPattern != nil:
			pat, err := kyvernov1.FromJSON(fe.RawPattern)
			if err == nil && hasVariables(pat) {
				err = cannot("pattern holds variables")
			}
			if err == nil {
				body, err = elementTranslator(pt, fe.List).translate(pat, atom(x), "")
			}
			if err != nil {
				pt.vars.release(x)
				return outcome{}, wrap(err, "entry %d pattern", i)
			}
		case fe.RawAnyPattern != nil:
			raw, err := kyvernov1.FromJSON(fe.RawAnyPattern)
			if err == nil {
				body, err = anyPattern(elementTranslator(pt, fe.List), raw, atom(x), "")
			}
			if err != nil {
				pt.vars.release(x)
				return outcome{}, wrap(err, "entry %d anyPattern", i)
			}
		default:
			pt.vars.release(x)
			return outcome{}, cannot("entry %d has no pattern, anyPattern or deny", i)
		}
		elem = elem.then(body)
		pt.vars.release(x)
		checks = append(checks, macro(list, "all", x, binds.around(elem.passOrSkip())))
		applies := macro(list, "exists", x, binds.around(elem.cond))
		if elem.cond.isTrue() {
			applies = rel(fn("size", list), ">", atom("0"))
			if always {
				applies = celTrue
			}
		}
		conds = append(conds, applies)
	}
	return outcome{cond: or(conds...), check: and(checks...)}, nil
}

var optionalSegment = regexp.MustCompile(`\.\?([A-Za-z_][A-Za-z0-9_]*)`)

// foreachList converts a foreach list: a missing list skips the entry, so
// the path is read with optional steps and an empty default, except along
// paths every matched resource has. always reports a list that is never
// missing or empty (a Pod's containers).
func foreachList(scope *jmesScope, pt *patternTranslator, src string) (expr, bool, error) {
	jv, err := scope.convert(src)
	if err != nil {
		return expr{}, false, err
	}
	s := jv.e.s
	if !strings.HasPrefix(s, "object.") || strings.ContainsAny(s, "()[ ") {
		return jv.e, false, nil
	}
	path := strings.TrimPrefix(s, "object.")
	segs := strings.Split(path, ".")
	var b strings.Builder
	b.WriteString("object")
	optional := false
	prefix := ""
	for _, seg := range segs {
		prefix = join(prefix, seg)
		if pt.present[prefix] && !optional {
			b.WriteString("." + seg)
			continue
		}
		optional = true
		b.WriteString(".?" + seg)
	}
	if !optional {
		return atom(b.String()), pt.present[path], nil
	}
	return call(atom(b.String()), "orValue", atom("[]")), false, nil
}

// message is a rule message for CEL: a plain message, or a
// messageExpression when it holds variables.
type message struct {
	text   string
	isExpr bool
}

var variableRef = regexp.MustCompile(`\{\{-?\s*(.*?)\s*\}\}`)

func messageFor(msg string, scope *jmesScope) (message, []string) {
	if !strings.Contains(msg, "{{") {
		return message{text: msg}, nil
	}
	e, err := templateString(msg, scope)
	if err != nil {
		return message{text: variableRef.ReplaceAllString(msg, "$1")}, []string{"message " + msg + ": kept as text, " + err.Error()}
	}
	return message{text: e.s, isExpr: true}, nil
}

// elementTranslator translates patterns on the elements of a foreach
// list: a container's name and image are always there.
func elementTranslator(pt *patternTranslator, list string) *patternTranslator {
	present := map[string]bool{}
	if strings.HasSuffix(strings.TrimSuffix(list, "[]"), "ontainers") {
		present["name"], present["image"] = true, true
	}
	return &patternTranslator{present: present, vars: pt.vars}
}

// layout puts each top-level operand of a long && or || chain on a line
// of its own, so the YAML holds a readable block.
func layout(s string) string {
	if len(s) <= 100 {
		return s
	}
	for _, op := range []string{" && ", " || "} {
		parts := splitTopLevel(s, op)
		if len(parts) > 1 {
			return strings.Join(parts, "\n"+strings.TrimSpace(op)+" ")
		}
	}
	return s
}

// matchedOperations lists the operations every resource rule selects,
// and "" for a background scan; none when they differ or include "*".
func matchedOperations(mr *admissionregistrationv1.MatchResources) []string {
	if mr == nil || len(mr.ResourceRules) == 0 {
		return nil
	}
	var ops []string
	for i, r := range mr.ResourceRules {
		var these []string
		for _, o := range r.Operations {
			if o == admissionregistrationv1.OperationAll {
				return nil
			}
			these = append(these, string(o))
		}
		if i > 0 && !slices.Equal(ops, these) {
			return nil
		}
		ops = these
	}
	// A background scan has no operation: a condition must hold for it
	// too to be left out.
	return append(ops, "")
}
