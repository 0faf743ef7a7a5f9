package cpol

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsyaml "sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/variables"
	"github.com/charter-dev/charter/engine/wildcard"
)

// This file holds the checks Kyverno's policy validation
// (pkg/validation/policy, the api/kyverno/v1 Validate methods and
// pkg/policy/{validate,mutate,generate}) makes of a ClusterPolicy or
// Policy that the rest of the compiler does not make as a side effect of
// compiling. docs/policy-validation.md lists every check with its test.

// checkSpec makes Kyverno's policy-level checks.
func checkSpec(p *Policy, f *fault.Collector) {
	spec := p.spec
	if !spec.AdmissionProcessingEnabled() && !spec.BackgroundProcessingEnabled() {
		f.Add("spec.admission", "disabling both admission and background processing is not allowed")
	}
	if !spec.AdmissionProcessingEnabled() && slices.ContainsFunc(spec.Rules, func(r kyvernov1.Rule) bool {
		// verifyImages has its own refusal (imageverify_compile.go).
		return r.HasMutate() || r.HasGenerate()
	}) && !slices.ContainsFunc(spec.Rules, func(r kyvernov1.Rule) bool { return r.HasVerifyImages() }) {
		f.Add("spec.admission", "disabling admission processing is only allowed with validation policies")
	}
	if t := spec.WebhookTimeoutSeconds; t != nil && (*t < 1 || *t > 30) {
		f.Add("spec.webhookTimeoutSeconds", fmt.Sprintf("the timeout value must be between 1 and 30 seconds, not %d", *t))
	}
	if spec.MutateExistingOnPolicyUpdate {
		for i := range spec.Rules {
			if r := &spec.Rules[i]; r.HasMutate() && len(r.Mutation.Targets) == 0 {
				f.Add("spec.mutateExistingOnPolicyUpdate", fmt.Sprintf("rules[%d].mutate.targets has to be specified when mutateExistingOnPolicyUpdate is set", i))
			}
		}
	}
	if p.namespace != "" {
		if len(spec.ValidationFailureActionOverrides) > 0 {
			f.Add("spec.validationFailureActionOverrides", "use of validationFailureActionOverrides is supported only with ClusterPolicy")
		}
		return
	}
	checkOverrideNamespaces(spec.ValidationFailureActionOverrides, "spec.validationFailureActionOverrides", f)
	for i := range spec.Rules {
		if v := spec.Rules[i].Validation; v != nil {
			checkOverrideNamespaces(v.FailureActionOverrides, fmt.Sprintf("spec.rules[%d].validate.failureActionOverrides", i), f)
		}
	}
}

// checkOverrideNamespaces refuses overrides that give one namespace both
// actions: the same name under Audit and Enforce, or a wildcard of one
// action that matches a name or a wildcard of the other.
func checkOverrideNamespaces(overrides []kyvernov1.ValidationFailureActionOverride, path string, f *fault.Collector) {
	type seen struct{ names, patterns []string }
	byAction := map[bool]*seen{true: {}, false: {}}
	for i, o := range overrides {
		p := fmt.Sprintf("%s[%d].namespaces", path, i)
		enforce := o.Action.Enforce()
		own, other := byAction[enforce], byAction[!enforce]
		for _, ns := range o.Namespaces {
			if wildcard.ContainsWildcard(ns) {
				for _, n := range other.names {
					if wildcard.Match(ns, n) {
						f.Add(p, fmt.Sprintf("conflicting namespaces found: wildcard pattern %q matches namespace %q of the other action", ns, n))
					}
				}
				for _, q := range other.patterns {
					if wildcard.Match(ns, q) || wildcard.Match(q, ns) {
						f.Add(p, fmt.Sprintf("conflicting namespaces found: wildcard pattern %q conflicts with the pattern %q of the other action", ns, q))
					}
				}
				own.patterns = append(own.patterns, ns)
				continue
			}
			if slices.Contains(other.names, ns) {
				f.Add(p, fmt.Sprintf("conflicting namespaces found: %s is given both Audit and Enforce", ns))
			}
			for _, q := range other.patterns {
				if wildcard.Match(q, ns) {
					f.Add(p, fmt.Sprintf("conflicting namespaces found: namespace %q matches wildcard pattern %q of the other action", ns, q))
				}
			}
			own.names = append(own.names, ns)
		}
	}
}

// checkRule makes Kyverno's rule-level checks on a rule written in spec
// (autogen rules repeat their source's faults).
func checkRule(p *Policy, r *kyvernov1.Rule, path string, f *fault.Collector) {
	if len(r.CELPreconditions) > 0 && !r.HasValidateCEL() {
		f.Add(path+".celPreconditions", "celPreconditions can only be used with validate.cel")
	}
	checkMatchBlock(p, &r.MatchResources, path+".match", f)
	if r.ExcludeResources != nil {
		checkMatchBlock(p, r.ExcludeResources, path+".exclude", f)
	}
	for _, block := range []struct {
		name string
		m    *kyvernov1.MatchResources
	}{{"match", &r.MatchResources}, {"exclude", r.ExcludeResources}} {
		if block.m == nil {
			continue
		}
		raw, _ := json.Marshal(block.m)
		if len(variables.Find(string(raw))) > 0 {
			f.Add(path+"."+block.name, fmt.Sprintf("rule %q should not have variables in %s section", r.Name, block.name))
		}
	}
	checkMatchKinds(r, path, f)
	checkWildcardKinds(p, r, path, f)
	checkBackgroundSubresources(p, r, path, f)
	checkContextEntries(r, path+".context", f)
	checkOperationValues(r, path, f)
	if r.HasGenerate() && slices.Contains(r.MatchResources.ResourceDescription.Kinds, r.Generation.Kind) && r.Generation.Kind != "" {
		f.Add(path+".generate.kind", "generation kind and match resource kind should not be the same")
	}
	if r.HasGenerate() && r.Generation.CloneList.Selector != nil && selectorHasWildcard(r.Generation.CloneList.Selector) {
		f.Add(path+".generate.cloneList.selector", "wildcard characters `*/?` not supported")
	}
	checkPodSecurityControls(r, path, f)
	checkMatchExcludeConflict(r, path, f)
}

// checkMatchBlock checks the user information and resource descriptions
// of a match or exclude block, in every form (inline, any, all).
func checkMatchBlock(p *Policy, m *kyvernov1.MatchResources, path string, f *fault.Collector) {
	checkUserInfoEntries(&m.UserInfo, path, f)
	checkResourceDescription(p, &m.ResourceDescription, path+".resources", f)
	for _, list := range []struct {
		name    string
		filters kyvernov1.ResourceFilters
	}{{"any", m.Any}, {"all", m.All}} {
		for i := range list.filters {
			fp := fmt.Sprintf("%s.%s[%d]", path, list.name, i)
			checkUserInfoEntries(&list.filters[i].UserInfo, fp, f)
			checkResourceDescription(p, &list.filters[i].ResourceDescription, fp+".resources", f)
		}
	}
}

// checkUserInfoEntries refuses subjects Kubernetes RBAC does not know and
// roles not written namespace:name.
func checkUserInfoEntries(u *kyvernov1.UserInfo, path string, f *fault.Collector) {
	for i, s := range u.Subjects {
		sp := fmt.Sprintf("%s.subjects[%d]", path, i)
		switch s.Kind {
		case "":
			f.Add(sp+".kind", "a subject needs a kind: 'User', 'Group', or 'ServiceAccount'")
		case rbacv1.UserKind, rbacv1.GroupKind, rbacv1.ServiceAccountKind:
		default:
			f.Add(sp+".kind", fmt.Sprintf("%q: kind must be 'User', 'Group', or 'ServiceAccount'", s.Kind))
		}
		if s.Name == "" {
			f.Add(sp+".name", "a subject needs a name")
		}
		if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == "" {
			f.Add(sp+".namespace", "namespace is required when kind is ServiceAccount")
		}
	}
	for i, role := range u.Roles {
		if len(strings.Split(role, ":")) != 2 {
			f.Add(fmt.Sprintf("%s.roles[%d]", path, i), fmt.Sprintf("%q: Role is expected to be in namespace:name format", role))
		}
	}
}

func checkResourceDescription(p *Policy, d *kyvernov1.ResourceDescription, path string, f *fault.Collector) {
	if d.Name != "" && len(d.Names) > 0 {
		f.Add(path, "both name and names can not be specified together")
	}
	CheckSelectorRequirements(d.Selector, path+".selector", f)
	if p.namespace != "" && len(d.Namespaces) > 0 {
		f.Add(path+".namespaces", "filtering namespaces not allowed in namespaced policies")
	}
}

func selectorHasWildcard(sel *metav1.LabelSelector) bool {
	for k, v := range sel.MatchLabels {
		if wildcard.ContainsWildcard(k) || wildcard.ContainsWildcard(v) {
			return true
		}
	}
	return false
}

// kindLists returns every kinds list of a rule's match and exclude blocks
// with its field path.
func kindLists(r *kyvernov1.Rule, path string) map[string][]string {
	out := map[string][]string{}
	add := func(p string, m *kyvernov1.MatchResources) {
		if m == nil {
			return
		}
		if len(m.ResourceDescription.Kinds) > 0 {
			out[p+".resources.kinds"] = m.ResourceDescription.Kinds
		}
		for i := range m.Any {
			if len(m.Any[i].ResourceDescription.Kinds) > 0 {
				out[fmt.Sprintf("%s.any[%d].resources.kinds", p, i)] = m.Any[i].ResourceDescription.Kinds
			}
		}
		for i := range m.All {
			if len(m.All[i].ResourceDescription.Kinds) > 0 {
				out[fmt.Sprintf("%s.all[%d].resources.kinds", p, i)] = m.All[i].ResourceDescription.Kinds
			}
		}
	}
	add(path+".match", &r.MatchResources)
	add(path+".exclude", r.ExcludeResources)
	return out
}

// checkMatchKinds refuses, as Kyverno's validateMatchKindHelper does, a
// match filter that names resources without a kind: the kind attribute
// is mandatory. A filter with no resources at all has its own fault
// ("match resources not specified").
func checkMatchKinds(r *kyvernov1.Rule, path string, f *fault.Collector) {
	check := func(d *kyvernov1.ResourceDescription, p string) {
		if len(d.Kinds) > 0 || d.IsEmpty() {
			return
		}
		if ruleOnlyTouchesMetadata(r) {
			f.Add(p+".kinds", "at least one element must be specified in a kind block, the kind attribute is mandatory when working with the resources element")
		} else {
			f.Add(p+".kinds", "policy can only deal with the metadata field of the resource if the rule does not match any kind")
		}
	}
	m := &r.MatchResources
	switch {
	case len(m.Any) > 0:
		for i := range m.Any {
			check(&m.Any[i].ResourceDescription, fmt.Sprintf("%s.match.any[%d].resources", path, i))
		}
	case len(m.All) > 0:
		for i := range m.All {
			check(&m.All[i].ResourceDescription, fmt.Sprintf("%s.match.all[%d].resources", path, i))
		}
	default:
		check(&m.ResourceDescription, path+".match.resources")
	}
}

// checkWildcardKinds makes Kyverno's checks of a rule that matches every
// kind ("*"): never in background mode, never with another kind, not for
// Generate, verifyImages or validate foreach, and only touching metadata.
func checkWildcardKinds(p *Policy, r *kyvernov1.Rule, path string, f *fault.Collector) {
	for kp, kinds := range kindLists(r, path) {
		if !slices.Contains(kinds, "*") {
			continue
		}
		switch {
		case p.spec.BackgroundProcessingEnabled():
			f.Add(kp, "wildcard policy not allowed in background mode; set spec.background to false to disable background mode for this policy rule")
		case len(kinds) > 1:
			f.Add(kp, "wildcard policy can not deal with more than one kind")
		case r.HasGenerate() || r.HasVerifyImages() || (r.Validation != nil && r.Validation.ForEachValidation != nil):
			f.Add(kp, "wildcard policy does not support rule type")
		case !ruleOnlyTouchesMetadata(r):
			f.Add(kp, "policy can only deal with the metadata field of the resource if the rule does not match any kind")
		}
	}
}

// ruleOnlyTouchesMetadata reports whether a rule's patterns and patches
// reach nothing but metadata, what every kind has.
func ruleOnlyTouchesMetadata(r *kyvernov1.Rule) bool {
	onlyMetadata := func(v any) bool {
		m, _ := v.(map[string]any)
		for k := range m {
			if k != "metadata" {
				return false
			}
		}
		return true
	}
	if r.Mutation != nil {
		if !onlyMetadata(celruntime.PlainJSON(r.Mutation.RawPatchStrategicMerge)) {
			return false
		}
		if r.Mutation.PatchesJSON6902 != "" {
			for _, path := range json6902Paths(r.Mutation.PatchesJSON6902) {
				if !strings.HasPrefix(path, "/metadata") {
					return false
				}
			}
		}
	}
	if r.Validation != nil {
		if !onlyMetadata(celruntime.PlainJSON(r.Validation.RawPattern)) {
			return false
		}
		if anyPatterns, ok := celruntime.PlainJSON(r.Validation.RawAnyPattern).([]any); ok {
			for _, pat := range anyPatterns {
				if !onlyMetadata(pat) {
					return false
				}
			}
		}
	}
	return true
}

// json6902Paths returns the path of every operation of a patchesJson6902
// text, with variables standing in as plain strings; a text that does not
// decode yields the one path "" (compileJSON6902 refuses it).
func json6902Paths(text string) []string {
	probe := []byte(neutraliseVariables(text))
	if len(probe) == 0 || probe[0] != '[' {
		var err error
		if probe, err = sigsyaml.YAMLToJSON(probe); err != nil {
			return []string{""}
		}
	}
	var ops []struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(probe, &ops) != nil {
		return []string{""}
	}
	paths := make([]string, len(ops))
	for i, op := range ops {
		paths[i] = op.Path
	}
	return paths
}

// checkBackgroundSubresources refuses a validate rule of a policy with
// background scans on that matches a subresource ("Pod/exec"): a
// subresource is a request, never a stored object, so a scan could never
// see it. Kyverno finds the subresource through discovery; the selector
// names it.
func checkBackgroundSubresources(p *Policy, r *kyvernov1.Rule, path string, f *fault.Collector) {
	if !r.HasValidate() || !p.spec.BackgroundProcessingEnabled() {
		return
	}
	for kp, kinds := range kindLists(r, path) {
		if strings.Contains(kp, ".exclude") {
			continue
		}
		for i, k := range kinds {
			if match.ParseKind(k).SubResource != "" {
				f.Add(fmt.Sprintf("%s[%d]", kp, i), fmt.Sprintf("background scan enabled with subresource %s; set spec.background to false", k))
			}
		}
	}
}

// reservedContextNames are variables the engine defines; a context entry
// may not take their names.
var reservedContextNames = []string{"images", "request", "serviceAccountName", "serviceAccountNamespace", "element", "elementIndex"}

// checkContextEntries makes Kyverno's context entry checks that
// CheckContext does not make as it compiles.
func checkContextEntries(r *kyvernov1.Rule, path string, f *fault.Collector) {
	for i, e := range r.Context {
		p := fmt.Sprintf("%s[%d]", path, i)
		for _, v := range reservedContextNames {
			if e.Name == v || strings.HasPrefix(e.Name, v+".") {
				f.Add(p+".name", fmt.Sprintf("entry name %s is invalid as it conflicts with a pre-defined variable %s", e.Name, v))
			}
		}
		if e.ConfigMap != nil {
			if e.ConfigMap.Name == "" {
				f.Add(p+".configMap.name", "a name is required for configMap context entry")
			}
			if e.ConfigMap.Namespace == "" {
				f.Add(p+".configMap.namespace", "a namespace is required for configMap context entry")
			}
		}
		if e.APICall != nil && e.APICall.URLPath != "" && e.APICall.Service != nil {
			f.Add(p+".apiCall.urlPath", "a URLPath cannot be used for service API calls")
		}
		if e.Variable != nil && e.Variable.Default != nil && e.Variable.JMESPath == "" {
			f.Add(p+".variable.default", "a variable must define a default value only when a jmesPath expression is defined")
		}
	}
}

// admissionOperations are the values request.operation can take.
var admissionOperations = []string{"CREATE", "UPDATE", "DELETE", "CONNECT"}

// checkOperationValues refuses a precondition or deny condition on
// {{request.operation}} whose value no request can have.
func checkOperationValues(r *kyvernov1.Rule, path string, f *fault.Collector) {
	check := func(raw *apiextv1.JSON, p string) {
		block, err := kyvernov1.ParseConditions(raw)
		if err != nil || block == nil {
			return
		}
		for _, list := range []struct {
			name  string
			conds []kyvernov1.Condition
		}{{"any", block.AnyConditions}, {"all", block.AllConditions}} {
			for i, c := range list.conds {
				key, _ := celruntime.PlainJSON(c.RawKey).(string)
				if strings.ReplaceAll(key, " ", "") != "{{request.operation}}" {
					continue
				}
				cp := fmt.Sprintf("%s.%s[%d].value", p, list.name, i)
				switch v := celruntime.PlainJSON(c.RawValue).(type) {
				case string:
					if strings.HasPrefix(v, "{{") && strings.HasSuffix(v, "}}") {
						continue
					}
					if !slices.Contains(admissionOperations, v) {
						f.Add(cp, fmt.Sprintf("unknown value '%s' found under the 'value' field. Only the following values are allowed: [CREATE, UPDATE, DELETE, CONNECT]", v))
					}
				case []any:
					for j, e := range v {
						s, _ := e.(string)
						if !slices.Contains(admissionOperations, s) {
							f.Add(fmt.Sprintf("%s[%d]", cp, j), fmt.Sprintf("unknown value '%v' found under the 'value' field. Only the following values are allowed: [CREATE, UPDATE, DELETE, CONNECT]", e))
						}
					}
				}
			}
		}
	}
	check(r.RawAnyAllConditions, path+".preconditions")
	if r.Validation != nil && r.Validation.Deny != nil {
		check(r.Validation.Deny.RawAnyAllConditions, path+".validate.deny.conditions")
	}
}

// Pod Security Standards control classes, as Kyverno's policy validation
// knows them.
var (
	pssRestrictedControls = []string{"Volume Types", "Privilege Escalation", "Running as Non-root", "Running as Non-root user", "Seccomp", "Capabilities"}
	pssPodLevelControls   = []string{"Host Namespaces", "HostPath Volumes", "Sysctls", "AppArmor", "Volume Types"}
	pssContainerControls  = []string{"Capabilities", "Privileged Containers", "Host Ports", "/proc Mount Type", "Privilege Escalation"}
)

// checkPodSecurityControls refuses exclusions that cannot apply: a
// container-level control without images, a pod-level one with images,
// and a restricted-only control under level baseline.
func checkPodSecurityControls(r *kyvernov1.Rule, path string, f *fault.Collector) {
	if r.Validation == nil || r.Validation.PodSecurity == nil {
		return
	}
	ps := r.Validation.PodSecurity
	for i, ex := range ps.Exclude {
		p := fmt.Sprintf("%s.validate.podSecurity.exclude[%d].controlName", path, i)
		switch {
		case slices.Contains(pssContainerControls, ex.ControlName) && len(ex.Images) == 0:
			f.Add(p, fmt.Sprintf("%q: exclude.images must be specified for the container level control", ex.ControlName))
		case slices.Contains(pssPodLevelControls, ex.ControlName) && len(ex.Images) != 0:
			f.Add(p, fmt.Sprintf("%q: exclude.images must not be specified for the pod level control", ex.ControlName))
		}
		if ex.ControlName == "Seccomp" || ex.ControlName == "Capabilities" {
			continue
		}
		if string(ps.Level) == "baseline" && slices.Contains(pssRestrictedControls, ex.ControlName) {
			f.Add(p, fmt.Sprintf("%q: invalid control name defined at the given level", ex.ControlName))
		}
	}
}

// knownVariable matches the variables the engine always defines, as
// Kyverno's policy validation allows them: anything reading the request,
// the foreach element, images, the service account, a mutate target or
// @, and anything that calls a function (its arguments are checked when
// it runs). Unanchored, as Kyverno's.
var knownVariable = regexp.MustCompile(`request|serviceAccountName|serviceAccountNamespace|element|elementIndex|@|images|image|target|[a-z_0-9]+\(`)

// variableRoot is the identifier a JMESPath expression starts with.
var variableRoot = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*`)

// ClusterFaults returns the faults of a ClusterPolicy or Policy that only
// hold in the cluster, where nothing but the policy itself defines
// variables: a variable that names nothing the rule defines (no context
// entry of the rule, its foreach blocks or its targets, no attestation,
// nothing the engine sets) can never resolve there, so the rule would
// error on every request it matches. Policy admission and the GitOps
// check refuse it (policycheck.Object), as Kyverno's policy validation
// does; the CLI does not, since a values file or --set may define it.
func ClusterFaults(p kyvernov1.PolicyInterface) fault.List {
	spec := p.GetSpec()
	if spec == nil {
		return nil
	}
	f := &fault.Collector{Kind: p.GetKind(), Name: policyid.Key(p)}
	for i := range spec.Rules {
		raw, err := ruleJSON(&spec.Rules[i])
		if err != nil {
			continue
		}
		checkUndefinedVariables(raw, fmt.Sprintf("spec.rules[%d]", i), f)
	}
	return f.Errs
}

// checkUndefinedVariables refuses a variable that names nothing the rule
// defines. Attestation conditions are left out, as Kyverno leaves them:
// their variables come from the attestation payload.
func checkUndefinedVariables(raw map[string]any, path string, f *fault.Collector) {
	var defined []string
	var collect func(v any)
	collect = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, child := range t {
				if k == "context" || k == "attestations" {
					if list, ok := child.([]any); ok {
						for _, e := range list {
							if m, ok := e.(map[string]any); ok {
								if name, _ := m["name"].(string); name != "" {
									defined = append(defined, name)
								}
							}
						}
					}
				}
				collect(child)
			}
		case []any:
			for _, child := range t {
				collect(child)
			}
		}
	}
	collect(raw)
	checked := make(map[string]any, len(raw))
	for k, v := range raw {
		switch k {
		case "match", "exclude", "verifyImages":
			// match and exclude may hold no variables at all; attestation
			// conditions read the payload.
			continue
		}
		checked[k] = v
	}
	walkStrings(checked, path, func(p, s string) {
		for _, expr := range variables.Find(s) {
			if strings.Contains(expr, "{{") || knownVariable.MatchString(expr) {
				continue
			}
			root := variableRoot.FindString(expr)
			if root == "" || root == "true" || root == "false" || root == "null" {
				continue
			}
			if slices.ContainsFunc(defined, func(name string) bool { return strings.HasPrefix(expr, name) }) {
				continue
			}
			f.Add(p, fmt.Sprintf("variable {{%s}} names nothing the rule defines (no context entry %q, and not request, element, images, serviceAccountName or target): it can never resolve", expr, root))
		}
	})
}

// checkMatchExcludeConflict refuses a rule whose exclude block excludes
// everything its match block matches, as Kyverno's
// ValidateMatchExcludeConflict does: the same filter in match.any and
// exclude.any, or an inline exclude that covers the inline match in every
// respect it names.
func checkMatchExcludeConflict(r *kyvernov1.Rule, path string, f *fault.Collector) {
	ex := r.ExcludeResources
	if ex == nil || len(ex.All) > 0 || len(r.MatchResources.All) > 0 {
		return
	}
	m := &r.MatchResources
	if len(m.Any) > 0 && len(ex.Any) > 0 {
		for i := range m.Any {
			for j := range ex.Any {
				if reflect.DeepEqual(m.Any[i], ex.Any[j]) {
					f.Add(path, fmt.Sprintf("rule is matching an empty set: match.any[%d] and exclude.any[%d] are the same filter", i, j))
					return
				}
			}
		}
		return
	}
	if ex.IsEmpty() || len(ex.Any) > 0 || len(m.Any) > 0 {
		return
	}
	mr, er := &m.ResourceDescription, &ex.ResourceDescription
	covers := func(exclude, match []string) bool {
		if len(exclude) == 0 {
			return true
		}
		if len(match) == 0 {
			return false
		}
		for _, v := range match {
			if !slices.Contains(exclude, v) {
				return false
			}
		}
		return true
	}
	if !covers(ex.Roles, m.Roles) || !covers(ex.ClusterRoles, m.ClusterRoles) {
		return
	}
	if len(ex.Subjects) > 0 {
		if len(m.Subjects) == 0 {
			return
		}
		for _, s := range m.Subjects {
			if !slices.Contains(ex.Subjects, s) {
				return
			}
		}
	}
	if er.Name != "" && !wildcard.Match(er.Name, mr.Name) {
		return
	}
	if len(er.Names) > 0 {
		for _, mn := range mr.Names {
			for _, en := range er.Names {
				if wildcard.Match(en, mn) {
					f.Add(path, "rule is matching an empty set: exclude names every name match names")
					return
				}
			}
		}
		return
	}
	if !covers(er.Namespaces, mr.Namespaces) || !covers(er.Kinds, mr.Kinds) {
		return
	}
	if !selectorCovers(er.Selector, mr.Selector) || !selectorCovers(er.NamespaceSelector, mr.NamespaceSelector) {
		return
	}
	if (mr.Annotations == nil) != (er.Annotations == nil) || !reflect.DeepEqual(mr.Annotations, er.Annotations) {
		return
	}
	f.Add(path, "rule is matching an empty set: exclude covers everything match selects")
}

// selectorCovers reports, as Kyverno judges it, whether an exclude
// selector excludes everything a match selector selects: both absent, or
// the exclude's expressions and labels all in the match's.
func selectorCovers(exclude, match *metav1.LabelSelector) bool {
	if exclude == nil || match == nil {
		return exclude == nil && match == nil
	}
	if len(exclude.MatchExpressions) > 0 {
		if len(match.MatchExpressions) == 0 {
			return false
		}
		for _, e := range match.MatchExpressions {
			if !slices.ContainsFunc(exclude.MatchExpressions, func(x metav1.LabelSelectorRequirement) bool { return reflect.DeepEqual(x, e) }) {
				return false
			}
		}
	}
	if len(exclude.MatchLabels) > 0 {
		if len(match.MatchLabels) == 0 {
			return false
		}
		for k, v := range match.MatchLabels {
			if exclude.MatchLabels[k] != v {
				return false
			}
		}
	}
	return true
}
