// Package convert translates Kyverno ClusterPolicies and Policies into
// Kyverno's CEL policy kinds (policies.kyverno.io): validate rules into a
// ValidatingPolicy (a Policy into a NamespacedValidatingPolicy).
//
// The converter is pure: it reads policy objects and returns objects. What
// it cannot express in CEL with the same verdicts it lists per rule with a
// reason, and the caller decides whether a partial result is written.
// Whether the result gives the same verdicts is proved elsewhere
// (cmd/charter convert --verify runs the policy's own tests on both).
//
// Rules that share their match, preconditions and failure action become
// one policy whose validations run in rule order, as a ClusterPolicy's
// first failing rule decides its verdict; rules that differ become one
// policy each, named <policy>-<rule>.
package convert

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/fault"
)

// Problem is a part of a policy that did not convert.
type Problem struct {
	// Rule is the rule's name, or "" for the policy as a whole.
	Rule   string
	Reason string
}

func (p Problem) String() string {
	if p.Rule == "" {
		return p.Reason
	}
	return "rule " + p.Rule + ": " + p.Reason
}

// Output is one converted policy and the source rules it holds.
type Output struct {
	Object runtime.Object
	Name   string
	Kind   string
	Rules  []string
	// ClusterReads are the variables that read the cluster.
	ClusterReads []ClusterRead
}

// Result is the conversion of one source policy.
type Result struct {
	// Source is the policy converted; Exception is set instead for a
	// converted PolicyException.
	Source    kyvernov1.PolicyInterface
	Exception *kyvernov2.PolicyException
	// Cleanup is set instead for a converted cleanup policy.
	Cleanup kyvernov2.CleanupPolicyInterface
	// File is the file the source was read from, set by the caller; with
	// Key it tells apart policies of one name in different files (a
	// library's ClusterPolicy and its CEL-rule twin).
	File     string
	Outputs  []Output
	Problems []Problem
	// Notes are losses that do not change a verdict (a message whose
	// variables could not be rendered in CEL).
	Notes []string
}

// Key identifies the source: kind/namespace/name.
func (r *Result) Key() string {
	switch {
	case r.Exception != nil:
		return "PolicyException/" + r.Exception.Namespace + "/" + r.Exception.Name
	case r.Cleanup != nil:
		return r.Cleanup.GetKind() + "/" + r.Cleanup.GetNamespace() + "/" + r.Cleanup.GetName()
	}
	return Key(r.Source)
}

// Key identifies a source policy: kind/namespace/name.
func Key(p kyvernov1.PolicyInterface) string {
	return p.GetKind() + "/" + p.GetNamespace() + "/" + p.GetName()
}

// SourceKey identifies the source and the file it came from.
func (r *Result) SourceKey() string { return FileKey(r.File, r.Key()) }

// FileKey joins a file's absolute path and a source key (see Key).
func FileKey(file, key string) string {
	if abs, err := filepath.Abs(file); err == nil && file != "" {
		file = abs
	}
	return file + "#" + key
}

// Name is the source's name, namespace/name when namespaced.
func (r *Result) Name() string {
	var ns, name string
	switch {
	case r.Exception != nil:
		ns, name = r.Exception.Namespace, r.Exception.Name
	case r.Cleanup != nil:
		ns, name = r.Cleanup.GetNamespace(), r.Cleanup.GetName()
	default:
		ns, name = r.Source.GetNamespace(), r.Source.GetName()
	}
	if ns != "" {
		return ns + "/" + name
	}
	return name
}

// Rules counts the source's rules (an exception's entries).
func (r *Result) Rules() int {
	switch {
	case r.Exception != nil:
		return len(r.Exception.Spec.Exceptions)
	case r.Cleanup != nil:
		return 1
	}
	return len(r.Source.GetSpec().Rules)
}

// Clean reports whether every rule converted.
func (r *Result) Clean() bool { return len(r.Problems) == 0 }

// Convert translates one ClusterPolicy or Policy.
func Convert(p kyvernov1.PolicyInterface) *Result {
	res := &Result{Source: p}
	spec := p.GetSpec()
	if len(spec.ValidationFailureActionOverrides) > 0 {
		res.Problems = append(res.Problems, Problem{Reason: "validationFailureActionOverrides: per-namespace actions have no field in the CEL kinds; use charter's staged promotion (charter.dev/enforcement namespace label)"})
	}
	if spec.ApplyRules != nil && *spec.ApplyRules == kyvernov1.ApplyOne {
		res.Problems = append(res.Problems, Problem{Reason: "applyRules: One stops at the first matching rule; the CEL kinds have no equivalent"})
	}
	var rules []*convertedRule
	for i := range spec.Rules {
		r := &spec.Rules[i]
		cr, err := convertRule(p, r)
		if err != nil {
			res.Problems = append(res.Problems, Problem{Rule: r.Name, Reason: err.Error()})
			continue
		}
		res.Notes = append(res.Notes, cr.notes...)
		rules = append(rules, cr)
	}
	if len(rules) == 0 && len(res.Problems) == 0 {
		res.Problems = append(res.Problems, Problem{Reason: "no rules"})
	}
	groups := groupRules(rules)
	for _, g := range groups {
		name := p.GetName()
		if len(groups) > 1 {
			name = dnsName(p.GetName() + "-" + g[0].name)
		}
		res.Outputs = append(res.Outputs, buildPolicy(p, name, g))
	}
	res.Problems = append(res.Problems, compileProblems(res.Outputs)...)
	return res
}

// compileProblems compiles the converted policies with charter's engine:
// an output that does not compile is not written, whatever the rules
// said.
func compileProblems(outputs []Output) []Problem {
	var out []Problem
	for _, o := range outputs {
		_, err := engine.Compile([]kyvernov1.PolicyInterface{o.Object.(kyvernov1.PolicyInterface)})
		if err == nil {
			continue
		}
		var faults fault.List
		if errors.As(err, &faults) {
			for _, f := range faults {
				out = append(out, Problem{Reason: fmt.Sprintf("converted %s %s does not compile: %s: %s", o.Kind, o.Name, f.Field, f.Fault)})
			}
			continue
		}
		out = append(out, Problem{Reason: fmt.Sprintf("converted %s %s does not compile: %v", o.Kind, o.Name, err)})
	}
	return out
}

// convertedRule is one validate rule in CEL terms.
type convertedRule struct {
	name             string
	matchConstraints *admissionregistrationv1.MatchResources
	matchConditions  []admissionregistrationv1.MatchCondition
	variables        []admissionregistrationv1.Variable
	validations      []admissionregistrationv1.Validation
	auditAnnotations []admissionregistrationv1.AuditAnnotation
	actions          []admissionregistrationv1.ValidationAction
	// mutate rules carry mutations instead of validations.
	mutate    bool
	mutations []admissionregistrationv1.Mutation
	// kind is "generate" for generate rules, which carry generations.
	kind         string
	generations  []policiesv1.Generation
	generateEval *policiesv1.GeneratingPolicyEvaluationConfiguration
	notes        []string
	// clusterReads are the context entries converted to resource.Get
	// and resource.List variables.
	clusterReads []ClusterRead
	// targets are a mutate-existing rule's targets.
	targets *policiesv1.TargetMatchConstraints
	// image is set for a verifyImages rule, which becomes an
	// ImageValidatingPolicy of its own.
	image *imageRule
}

// groupKey is what rules must share to live in one policy.
func (r *convertedRule) groupKey() string {
	if r.image != nil {
		// Each verifyImages rule names its own attestors and images.
		return "verifyImages/" + r.name
	}
	b, _ := json.Marshal([]any{r.mutate, r.kind, r.generateEval, r.matchConstraints, r.matchConditions, r.actions, r.targets})
	return string(b)
}

func groupRules(rules []*convertedRule) [][]*convertedRule {
	var groups [][]*convertedRule
	index := map[string]int{}
	for _, r := range rules {
		k := r.groupKey()
		if i, ok := index[k]; ok && !clashingVariables(groups[i], r) {
			groups[i] = append(groups[i], r)
			continue
		}
		index[k] = len(groups)
		groups = append(groups, []*convertedRule{r})
	}
	return groups
}

func clashingVariables(group []*convertedRule, r *convertedRule) bool {
	seen := map[string]string{}
	for _, g := range group {
		for _, v := range g.variables {
			seen[v.Name] = v.Expression
		}
	}
	for _, v := range r.variables {
		if e, ok := seen[v.Name]; ok && e != v.Expression {
			return true
		}
	}
	return false
}

func dnsName(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-.")
	if len(out) > 253 {
		out = out[:253]
	}
	return out
}

// policyAnnotations are the source's annotations the converted policy
// keeps: the policies.kyverno.io catalogue ones (title, category,
// severity, description) and any not Kyverno's own.
func policyAnnotations(p kyvernov1.PolicyInterface) map[string]string {
	out := map[string]string{}
	for k, v := range p.GetAnnotations() {
		switch {
		case k == "pod-policies.kyverno.io/autogen-controllers", k == "kubectl.kubernetes.io/last-applied-configuration":
		case k == "policies.kyverno.io/minversion", k == "kyverno.io/kyverno-version":
		default:
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func buildPolicy(p kyvernov1.PolicyInterface, name string, rules []*convertedRule) Output {
	first := rules[0]
	if first.mutate {
		return buildMutatingPolicy(p, name, rules)
	}
	if first.kind == "generate" {
		return buildGeneratingPolicy(p, name, rules)
	}
	if first.image != nil {
		return buildImageValidatingPolicy(p, name, rules)
	}
	c := commonParts(p, name, rules)
	spec := policiesv1.ValidatingPolicySpec{
		MatchConstraints:     first.matchConstraints,
		MatchConditions:      first.matchConditions,
		ValidationAction:     first.actions,
		Variables:            c.variables,
		FailurePolicy:        c.failurePolicy,
		WebhookConfiguration: c.webhook,
	}
	for _, r := range rules {
		spec.Validations = append(spec.Validations, r.validations...)
		spec.AuditAnnotations = append(spec.AuditAnnotations, r.auditAnnotations...)
	}
	src := p.GetSpec()
	if src.Background != nil && !*src.Background || src.Admission != nil && !*src.Admission {
		eval := &policiesv1.EvaluationConfiguration{}
		if src.Background != nil && !*src.Background {
			f := false
			eval.Background = &policiesv1.BackgroundConfiguration{Enabled: &f}
		}
		if src.Admission != nil && !*src.Admission {
			f := false
			eval.Admission = &policiesv1.AdmissionConfiguration{Enabled: &f}
		}
		spec.EvaluationConfiguration = eval
	}
	if c.podControllers != nil {
		spec.AutogenConfiguration = &policiesv1.ValidatingPolicyAutogenConfiguration{PodControllers: c.podControllers}
	}
	if p.IsNamespaced() {
		return c.output(&policiesv1.NamespacedValidatingPolicy{ObjectMeta: c.meta, Spec: spec}, policiesv1.NamespacedValidatingPolicyKind)
	}
	return c.output(&policiesv1.ValidatingPolicy{ObjectMeta: c.meta, Spec: spec}, policiesv1.ValidatingPolicyKind)
}

// common is what a converted policy of any kind takes from its source
// policy and rules.
type common struct {
	name           string
	rules          []string
	variables      []admissionregistrationv1.Variable
	failurePolicy  *admissionregistrationv1.FailurePolicyType
	webhook        *policiesv1.WebhookConfiguration
	podControllers *policiesv1.PodControllersGenerationConfiguration
	meta           metav1.ObjectMeta
	clusterReads   []ClusterRead
}

func commonParts(p kyvernov1.PolicyInterface, name string, rules []*convertedRule) common {
	c := common{name: name, meta: metav1.ObjectMeta{Name: name, Annotations: policyAnnotations(p), Labels: p.GetLabels()}}
	if p.IsNamespaced() {
		c.meta.Namespace = p.GetNamespace()
	}
	seen := map[string]bool{}
	for _, r := range rules {
		c.rules = append(c.rules, r.name)
		c.clusterReads = append(c.clusterReads, r.clusterReads...)
		for _, v := range r.variables {
			if !seen[v.Name] {
				seen[v.Name] = true
				c.variables = append(c.variables, v)
			}
		}
	}
	src := p.GetSpec()
	if fp := failurePolicy(src); fp != nil {
		v := admissionregistrationv1.FailurePolicyType(*fp)
		c.failurePolicy = &v
	}
	if t := timeout(src); t != nil {
		c.webhook = &policiesv1.WebhookConfiguration{TimeoutSeconds: t}
	}
	if controllers, set := autogenControllers(p); set {
		c.podControllers = &policiesv1.PodControllersGenerationConfiguration{Controllers: controllers}
	}
	return c
}

// output names the converted object's kind and wraps it.
func (c common) output(obj runtime.Object, kind string) Output {
	obj.GetObjectKind().SetGroupVersionKind(policiesv1.GroupVersion.WithKind(kind))
	return Output{Object: obj, Name: c.name, Kind: kind, Rules: c.rules, ClusterReads: c.clusterReads}
}

func failurePolicy(s *kyvernov1.Spec) *kyvernov1.FailurePolicyType {
	if s.WebhookConfiguration != nil && s.WebhookConfiguration.FailurePolicy != nil {
		return s.WebhookConfiguration.FailurePolicy
	}
	return s.FailurePolicy
}

func timeout(s *kyvernov1.Spec) *int32 {
	if s.WebhookConfiguration != nil && s.WebhookConfiguration.TimeoutSeconds != nil {
		return s.WebhookConfiguration.TimeoutSeconds
	}
	return s.WebhookTimeoutSeconds
}

// controllerResources maps Kyverno's autogen controller kinds to the CEL
// kinds' podControllers names.
var controllerResources = map[string]string{
	"DaemonSet": "daemonsets", "Deployment": "deployments", "ReplicaSet": "replicasets",
	"StatefulSet": "statefulsets", "Job": "jobs", "CronJob": "cronjobs",
}

// autogenControllers reads pod-policies.kyverno.io/autogen-controllers:
// "none" is an empty list (no autogen); a list maps to resources; unset
// leaves the CEL default (all controllers).
func autogenControllers(p kyvernov1.PolicyInterface) ([]string, bool) {
	v, ok := p.GetAnnotations()["pod-policies.kyverno.io/autogen-controllers"]
	if !ok {
		return nil, false
	}
	out := []string{}
	if strings.TrimSpace(v) == "none" {
		return out, true
	}
	for _, k := range strings.Split(v, ",") {
		if r, ok := controllerResources[strings.TrimSpace(k)]; ok {
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out, true
}

func actionsFor(p kyvernov1.PolicyInterface, r *kyvernov1.Rule) ([]admissionregistrationv1.ValidationAction, error) {
	v := r.Validation
	if len(v.FailureActionOverrides) > 0 {
		return nil, cannot("failureActionOverrides: per-namespace actions have no field in the CEL kinds; use charter's staged promotion (charter.dev/enforcement namespace label)")
	}
	action := p.GetSpec().ValidationFailureAction
	if v.FailureAction != nil {
		action = *v.FailureAction
	}
	var out []admissionregistrationv1.ValidationAction
	switch strings.ToLower(string(action)) {
	case "enforce":
		out = append(out, admissionregistrationv1.Deny)
	default:
		out = append(out, admissionregistrationv1.Audit)
	}
	if w := p.GetSpec().EmitWarning; w != nil && *w {
		out = append(out, admissionregistrationv1.Warn)
	}
	return out, nil
}

func wrap(err error, format string, args ...any) error {
	if u, ok := err.(*unconvertible); ok {
		return cannot("%s: %s", fmt.Sprintf(format, args...), u.reason)
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
}

func jsonString(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// buildMutatingPolicy writes mutate rules as a MutatingPolicy whose
// mutations run in rule order.
func buildMutatingPolicy(p kyvernov1.PolicyInterface, name string, rules []*convertedRule) Output {
	c := commonParts(p, name, rules)
	spec := policiesv1.MutatingPolicySpec{
		MatchConstraints:     rules[0].matchConstraints,
		MatchConditions:      rules[0].matchConditions,
		Variables:            c.variables,
		FailurePolicy:        c.failurePolicy,
		WebhookConfiguration: c.webhook,
	}
	for _, r := range rules {
		spec.Mutations = append(spec.Mutations, r.mutations...)
	}
	if c.podControllers != nil {
		spec.AutogenConfiguration = &policiesv1.MutatingPolicyAutogenConfiguration{PodControllers: c.podControllers}
	}
	if t := rules[0].targets; t != nil {
		// Mutate existing: a matching request patches the targets, not
		// itself.
		enabled, disabled := true, false
		spec.TargetMatchConstraints = t
		spec.EvaluationConfiguration = &policiesv1.MutatingPolicyEvaluationConfiguration{
			MutateExisting: &policiesv1.MutateExistingConfiguration{Enabled: &enabled},
			Admission:      &policiesv1.AdmissionConfiguration{Enabled: &disabled},
		}
	}
	if p.IsNamespaced() {
		return c.output(&policiesv1.NamespacedMutatingPolicy{ObjectMeta: c.meta, Spec: spec}, "NamespacedMutatingPolicy")
	}
	return c.output(&policiesv1.MutatingPolicy{ObjectMeta: c.meta, Spec: spec}, "MutatingPolicy")
}
