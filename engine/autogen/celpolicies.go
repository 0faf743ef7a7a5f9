package autogen

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// The Pod-controller copies of the CEL policy kinds (ValidatingPolicy,
// MutatingPolicy, ImageValidatingPolicy): their spec rewritten for the
// controllers, compiled by the engine and registered by the webhooks as
// the policy's own (cel-policy-types.md §3.5).

// Copy is a CEL policy's spec S rewritten for some Pod controllers
// (ValidatingPolicy, MutatingPolicy, ImageValidatingPolicy).
type Copy[S any] struct {
	// Name is the copy's key in status.autogen.configs: defaults or
	// cronjobs.
	Name string
	Spec *S
	// Match is the copy's matchConstraints, which select the controllers.
	Match *admissionregistrationv1.MatchResources
}

// Pod controllers of autogen, by the resource name that selects them.
var (
	defaultsControllers = []struct{ group, resource string }{
		{"apps", "daemonsets"}, {"apps", "deployments"}, {"apps", "replicasets"}, {"apps", "statefulsets"}, {"batch", "jobs"},
	}
	objectRef = regexp.MustCompile(`\b(object|oldObject)\.`)
)

// ValidatingPolicy returns the policy's copies for Pod controllers
// (cel-policy-types.md §3.5): when it matches exactly Pods, one copy for
// daemonsets, deployments, replicasets, statefulsets and jobs, with
// object.X read as object.spec.template.X, and one for cronjobs under
// spec.jobTemplate.spec.template. object.metadata.namespace keeps its
// meaning, as in Kyverno, and so does object.metadata.name (Kyverno
// rewrites it to the template's, which has none, so that an expression
// naming the object errs on every controller).
func ValidatingPolicy(spec *policiesv1.ValidatingPolicySpec) []Copy[policiesv1.ValidatingPolicySpec] {
	var pc *policiesv1.PodControllersGenerationConfiguration
	if ag := spec.AutogenConfiguration; ag != nil {
		pc = ag.PodControllers
	}
	var out []Copy[policiesv1.ValidatingPolicySpec]
	for _, t := range PodControllerTargets(spec.MatchConstraints, pc) {
		if s := rewriteForController(spec, t.Prefix, t.Rules); s != nil {
			out = append(out, Copy[policiesv1.ValidatingPolicySpec]{Name: t.Name, Spec: s, Match: s.MatchConstraints})
		}
	}
	return out
}

// Target is one autogen copy of a Pod policy: its name (defaults,
// cronjobs), where the Pod's fields are in those controllers (object.X
// becomes object.<prefix>X) and the resource rules that select them.
type Target struct {
	Name   string
	Prefix string
	Rules  []admissionregistrationv1.NamedRuleWithOperations
}

// PodControllerTargets returns the autogen copies of a policy whose
// matchConstraints select exactly Pods (cel-policy-types.md §3.5: one
// resource rule, v1 pods, no resourceNames, no excludeResourceRules, no
// objectSelector), for the controllers pc selects (unset: all).
func PodControllerTargets(mc *admissionregistrationv1.MatchResources, pc *policiesv1.PodControllersGenerationConfiguration) []Target {
	if mc == nil || len(mc.ResourceRules) != 1 || len(mc.ExcludeResourceRules) > 0 || mc.ObjectSelector != nil && (len(mc.ObjectSelector.MatchLabels) > 0 || len(mc.ObjectSelector.MatchExpressions) > 0) {
		return nil
	}
	rule := mc.ResourceRules[0]
	if len(rule.ResourceNames) > 0 || !slices.Equal(rule.APIGroups, []string{""}) || !slices.Equal(rule.APIVersions, []string{"v1"}) || !slices.Equal(rule.Resources, []string{"pods"}) {
		return nil
	}
	wanted := map[string]bool{}
	all := true
	if pc != nil {
		if pc.Enabled != nil && !*pc.Enabled {
			return nil
		}
		if pc.Controllers != nil {
			all = false
			for _, c := range pc.Controllers {
				wanted[controllerResource(c)] = true
			}
		}
	}
	var out []Target
	byGroup := map[string][]string{}
	var groups []string
	for _, c := range defaultsControllers {
		if all || wanted[c.resource] {
			if byGroup[c.group] == nil {
				groups = append(groups, c.group)
			}
			byGroup[c.group] = append(byGroup[c.group], c.resource)
		}
	}
	if len(groups) > 0 {
		var rules []admissionregistrationv1.NamedRuleWithOperations
		for _, g := range groups {
			rules = append(rules, controllerRule(rule, g, byGroup[g]))
		}
		out = append(out, Target{Name: "defaults", Prefix: "spec.template.", Rules: rules})
	}
	if all || wanted["cronjobs"] {
		rules := []admissionregistrationv1.NamedRuleWithOperations{controllerRule(rule, "batch", []string{"cronjobs"})}
		out = append(out, Target{Name: "cronjobs", Prefix: "spec.jobTemplate.spec.template.", Rules: rules})
	}
	return out
}

// controllerResource normalises a controller name (Deployment,
// deployments) to its resource name.
func controllerResource(c string) string {
	c = strings.ToLower(c)
	if !strings.HasSuffix(c, "s") {
		c += "s"
	}
	return c
}

func controllerRule(pod admissionregistrationv1.NamedRuleWithOperations, group string, resources []string) admissionregistrationv1.NamedRuleWithOperations {
	r := *pod.DeepCopy()
	r.APIGroups = []string{group}
	r.APIVersions = []string{"v1"}
	r.Resources = resources
	return r
}

func rewriteForController(spec *policiesv1.ValidatingPolicySpec, prefix string, rules []admissionregistrationv1.NamedRuleWithOperations) *policiesv1.ValidatingPolicySpec {
	c := spec.DeepCopy()
	c.MatchConstraints = nil
	c.AutogenConfiguration = nil
	out := &policiesv1.ValidatingPolicySpec{}
	if !rewriteObjectRefs(c, prefix, out) {
		return nil
	}
	mc := spec.MatchConstraints.DeepCopy()
	mc.ResourceRules = rules
	out.MatchConstraints = mc
	// Kyverno's copy keeps the policy's autogen settings (status.autogen
	// shows them); they hold no expression to rewrite.
	out.AutogenConfiguration = spec.AutogenConfiguration.DeepCopy()
	return out
}

// rewriteObjectRefs decodes into out the JSON of in with every object.X
// and oldObject.X read as object.<prefix>X, except metadata.namespace and
// metadata.name (Kyverno's autogen text replacement over the whole spec).
func rewriteObjectRefs(in any, prefix string, out any) bool {
	data, err := json.Marshal(in)
	if err != nil {
		return false
	}
	text := string(data)
	var b strings.Builder
	last := 0
	for _, m := range objectRef.FindAllStringSubmatchIndex(text, -1) {
		b.WriteString(text[last:m[0]])
		rest := text[m[1]:]
		if strings.HasPrefix(rest, "metadata.namespace") || strings.HasPrefix(rest, "metadata.name") {
			b.WriteString(text[m[0]:m[1]])
		} else {
			b.WriteString(text[m[2]:m[3]] + "." + prefix)
		}
		last = m[1]
	}
	b.WriteString(text[last:])
	return json.Unmarshal([]byte(b.String()), out) == nil
}

var (
	// podFieldRef finds the Pod fields a MutatingPolicy reads or sets:
	// object.spec, object.metadata.labels/annotations (and oldObject's),
	// and the Object.spec/Object.metadata type names of an
	// ApplyConfiguration.
	podFieldRef = regexp.MustCompile(`\b(object|oldObject)\.(spec|metadata\.labels|metadata\.annotations)\b|\bObject\.(spec|metadata)\b`)
	// rootObject is an ApplyConfiguration's root Object{ literal.
	rootObject = regexp.MustCompile(`(^|[^.\w])Object\s*\{`)
)

// MutatingPolicy returns the policy's copies for Pod controllers
// (cel-policy-types.md §3.5). Kyverno rewrites only matchConditions and
// ApplyConfigurations, which leaves variables reading the Pod's fields on
// a Deployment (§8.12); charter rewrites the variables too. A JSONPatch
// names Pod paths that no rewrite can move safely, so a policy with one
// gets no autogen copies: its Pod mutations are not replayed on
// controllers, where Kyverno's would fail.
func MutatingPolicy(spec *policiesv1.MutatingPolicySpec) []Copy[policiesv1.MutatingPolicySpec] {
	for _, m := range spec.Mutations {
		if m.PatchType != admissionregistrationv1.PatchTypeApplyConfiguration {
			return nil
		}
	}
	var pc *policiesv1.PodControllersGenerationConfiguration
	if ag := spec.AutogenConfiguration; ag != nil {
		pc = ag.PodControllers
	}
	var out []Copy[policiesv1.MutatingPolicySpec]
	for _, t := range PodControllerTargets(spec.MatchConstraints, pc) {
		c := spec.DeepCopy()
		c.AutogenConfiguration = nil
		mc := spec.MatchConstraints.DeepCopy()
		mc.ResourceRules = t.Rules
		c.MatchConstraints = mc
		for i := range c.MatchConditions {
			c.MatchConditions[i].Expression = rewritePodFields(c.MatchConditions[i].Expression, t.Prefix)
		}
		for i := range c.Variables {
			c.Variables[i].Expression = rewritePodFields(c.Variables[i].Expression, t.Prefix)
		}
		for i := range c.Mutations {
			if ac := c.Mutations[i].ApplyConfiguration; ac != nil {
				ac.Expression = wrapRootObject(rewritePodFields(ac.Expression, t.Prefix), t.Prefix)
			}
		}
		out = append(out, Copy[policiesv1.MutatingPolicySpec]{Name: t.Name, Spec: c, Match: c.MatchConstraints})
	}
	return out
}

// rewritePodFields moves the Pod fields an expression names under a
// controller's template: object.spec becomes object.spec.template.spec,
// Object.metadata becomes Object.spec.template.metadata.
func rewritePodFields(expr, prefix string) string {
	return podFieldRef.ReplaceAllStringFunc(expr, func(m string) string {
		root, rest, _ := strings.Cut(m, ".")
		return root + "." + prefix + rest
	})
}

// wrapRootObject nests the root Object{...} literal of an
// ApplyConfiguration under the controller's template:
// Object{spec: Object.spec{template: Object.spec.template{...}}}.
func wrapRootObject(expr, prefix string) string {
	parts := strings.Split(strings.TrimSuffix(prefix, "."), ".")
	var open, closing strings.Builder
	typ := "Object"
	for _, field := range parts {
		open.WriteString(field + ": " + typ + "." + field + "{")
		typ += "." + field
		closing.WriteString("}")
	}
	var b strings.Builder
	last := 0
	for _, loc := range rootObject.FindAllStringSubmatchIndex(expr, -1) {
		start := loc[3] // after the character before Object
		body := strings.Index(expr[start:], "{") + start
		end := matchingBrace(expr, body)
		if end < 0 || start < last {
			continue
		}
		b.WriteString(expr[last:start])
		b.WriteString("Object{" + open.String())
		b.WriteString(expr[body+1 : end])
		b.WriteString(closing.String() + "}")
		last = end + 1
	}
	b.WriteString(expr[last:])
	return b.String()
}

// matchingBrace returns the index of the brace closing the one at open,
// skipping quoted strings; -1 when there is none.
func matchingBrace(s string, open int) int {
	depth := 0
	var quote byte
	for i := open; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// ImageValidatingPolicy returns the policy's copies for Pod controllers,
// with object.X read under their Pod template as ValidatingPolicy's.
func ImageValidatingPolicy(spec *policiesv1.ImageValidatingPolicySpec) []Copy[policiesv1.ImageValidatingPolicySpec] {
	var pc *policiesv1.PodControllersGenerationConfiguration
	if ag := spec.AutogenConfiguration; ag != nil {
		pc = ag.PodControllers
	}
	var out []Copy[policiesv1.ImageValidatingPolicySpec]
	for _, t := range PodControllerTargets(spec.MatchConstraints, pc) {
		c := spec.DeepCopy()
		c.MatchConstraints, c.AutogenConfiguration = nil, nil
		s := &policiesv1.ImageValidatingPolicySpec{}
		if !rewriteObjectRefs(c, t.Prefix, s) {
			continue
		}
		s.MatchConstraints = spec.MatchConstraints.DeepCopy()
		s.MatchConstraints.ResourceRules = t.Rules
		s.AutogenConfiguration = spec.AutogenConfiguration.DeepCopy()
		out = append(out, Copy[policiesv1.ImageValidatingPolicySpec]{Name: t.Name, Spec: s, Match: s.MatchConstraints})
	}
	return out
}
