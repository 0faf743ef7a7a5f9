// Package config writes the Mutating and ValidatingWebhookConfigurations
// that route admission requests to charter, built from the installed
// policies: only the groups, resources and operations they match, grouped
// by failure policy, with the timeout they ask for, a namespaceSelector
// that leaves kube-system and charter's own namespace alone, and the CA
// bundle of the serving certificate. Namespaced policies are registered
// in webhooks that select their own namespace only (namespacedGroups). The controller runs on the leader,
// rewrites the objects when policies change, recreates them when deleted,
// and removes them on request (charter serve --cleanup-webhooks).
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"unicode"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/autogen"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/ttl"
	"github.com/charter-dev/charter/engine/webhookmatch"
	"github.com/charter-dev/charter/engine/webhookrules"
)

// Names of the objects and webhooks charter manages. They follow Kyverno's
// shape (admission-reports.md §2.1) with charter in place of kyverno.
const (
	ResourceValidatingName = "charter-resource-validating-webhook-cfg"
	ResourceMutatingName   = "charter-resource-mutating-webhook-cfg"
	PolicyValidatingName   = "charter-policy-validating-webhook-cfg"

	ValidateWebhookFail   = "validate.charter.svc-fail"
	ValidateWebhookIgnore = "validate.charter.svc-ignore"
	MutateWebhookFail     = "mutate.charter.svc-fail"
	MutateWebhookIgnore   = "mutate.charter.svc-ignore"
	PolicyWebhook         = "validate-policy.charter.svc"
	TTLWebhook            = "verify-ttl.charter.svc"

	// ManagedByLabel marks every object charter writes; cleanup deletes
	// the webhook configurations that carry it.
	ManagedByLabel = "charter.dev/managed-by"
	ManagedByValue = "charter"

	// DefaultTimeoutSeconds is the webhook timeout a policy can raise, up
	// to MaxTimeoutSeconds.
	DefaultTimeoutSeconds int32 = 10
	MaxTimeoutSeconds     int32 = 30
)

// Target is where the API server sends requests: a URL out of cluster, or
// a Service in cluster.
type Target struct {
	// URL is the server's base URL, e.g. https://127.0.0.1:9443.
	URL string
	// Service, Namespace and Port name the Service in cluster.
	Service, Namespace string
	Port               int32
}

func (t Target) clientConfig(path string, caBundle []byte) admissionregistrationv1.WebhookClientConfig {
	if t.URL != "" {
		u := strings.TrimSuffix(t.URL, "/") + path
		return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: caBundle}
	}
	p, port := path, t.Port
	return admissionregistrationv1.WebhookClientConfig{CABundle: caBundle,
		Service: &admissionregistrationv1.ServiceReference{Namespace: t.Namespace, Name: t.Service, Path: &p, Port: &port}}
}

// Settings are what the configurations carry besides the policies.
type Settings struct {
	Target   Target
	CABundle []byte
	// ExcludedNamespaces are left out through the namespaceSelector,
	// normally kube-system and charter's namespace.
	ExcludedNamespaces []string
	// Promotion adds the promotion webhook (promotion.go) while some
	// policy is staged; set it only when the server serves /promotion.
	Promotion bool
}

// Resource is one API resource a kind selector resolves to.
type Resource struct {
	Group, Version, Resource string
	Namespaced               bool
}

// Resolver resolves a kind selector ("Pod", "apps/v1/Deployment",
// "Pod/exec", "*") to the resources the API server serves. An unknown kind
// resolves to nothing.
type Resolver interface {
	Resolve(group, version, kind, subresource string) ([]Resource, error)
}

// Configurations are the objects Build produces.
type Configurations struct {
	Validating       *admissionregistrationv1.ValidatingWebhookConfiguration
	Mutating         *admissionregistrationv1.MutatingWebhookConfiguration
	PolicyValidating *admissionregistrationv1.ValidatingWebhookConfiguration
	// Unresolved lists kind selectors that resolved to nothing, by policy.
	Unresolved map[string][]string
}

var (
	validateOps = []admissionregistrationv1.OperationType{"CONNECT", "CREATE", "DELETE", "UPDATE"}
	mutateOps   = []admissionregistrationv1.OperationType{"CREATE", "UPDATE"}
)

// ruleKey groups resources that share one webhook rule.
type ruleKey struct {
	group, version string
	scope          admissionregistrationv1.ScopeType
	ops            string
}

// webhookRules accumulates the rules of one webhook.
type webhookRules struct {
	resources map[ruleKey]map[string]bool
	timeout   int32
	policies  int
}

func newWebhookRules() *webhookRules {
	return &webhookRules{resources: map[ruleKey]map[string]bool{}, timeout: DefaultTimeoutSeconds}
}

func (w *webhookRules) add(r Resource, scope admissionregistrationv1.ScopeType, ops []admissionregistrationv1.OperationType) {
	if isNodes(r.Group, r.Resource) {
		// Never routed: see notNodes.
		return
	}
	names := make([]string, len(ops))
	for i, op := range ops {
		names[i] = string(op)
	}
	sort.Strings(names)
	k := ruleKey{group: r.Group, version: r.Version, scope: scope, ops: strings.Join(names, ",")}
	if w.resources[k] == nil {
		w.resources[k] = map[string]bool{}
	}
	w.resources[k][r.Resource] = true
	// A Pod's ephemeral containers are added through a subresource that
	// must be checked like the Pod itself.
	if r.Group == "" && (r.Resource == "pods" || r.Resource == "*") {
		w.resources[k]["pods/ephemeralcontainers"] = true
	}
}

func (w *webhookRules) rules() []admissionregistrationv1.RuleWithOperations {
	keys := make([]ruleKey, 0, len(w.resources))
	for k := range w.resources {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.group != b.group {
			return a.group < b.group
		}
		if a.version != b.version {
			return a.version < b.version
		}
		if a.scope != b.scope {
			return a.scope < b.scope
		}
		return a.ops < b.ops
	})
	out := make([]admissionregistrationv1.RuleWithOperations, 0, len(keys))
	for _, k := range keys {
		resources := slices.Sorted(maps.Keys(w.resources[k]))
		var ops []admissionregistrationv1.OperationType
		for _, op := range strings.Split(k.ops, ",") {
			ops = append(ops, admissionregistrationv1.OperationType(op))
		}
		scope := k.scope
		out = append(out, admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{
			APIGroups: []string{k.group}, APIVersions: []string{k.version}, Resources: resources, Scope: &scope}})
	}
	return out
}

// fineGrained is the webhook of one policy whose conditions the API
// server evaluates (webhookmatch.Conditions: a ClusterPolicy's
// spec.webhookConfiguration.matchConditions, admission-reports.md §2.3,
// or a CEL policy's spec.matchConditions, cel-policy-types.md §3.6):
// named <base>-<fp>-finegrained-<key> with / as -, on path
// /<validate|mutate>/<fp>/finegrained/<key> (policyid.FineGrainedKey:
// <name>, <namespace>/<name>, or validatingpolicy.policies.kyverno.io/<name>
// and the like), carrying those conditions, so the API server sends it
// only the requests they select.
type fineGrained struct {
	key string
	// namespace is a namespaced policy's: its webhook selects that
	// namespace only.
	namespace  string
	fp         kyvernov1.FailurePolicyType
	conditions []admissionregistrationv1.MatchCondition
	// namespaceSelector and objectSelector are a CEL policy's
	// matchConstraints' (webhookrules.Selectors): the API server
	// evaluates the conditions only within them.
	namespaceSelector, objectSelector *metav1.LabelSelector
	validating                        *webhookRules
	mutating                          *webhookRules
}

// suffix is what the webhook's name and path add to the group's:
// "-finegrained-ns-name" and "/finegrained/ns/name".
func (f *fineGrained) suffix() (name, path string) {
	return "-finegrained-" + strings.ReplaceAll(f.key, "/", "-"), "/finegrained/" + f.key
}

// uniqueWebhookNames makes the policies' own webhook names valid and
// distinct: the API server refuses a whole configuration when one name is
// longer than a DNS subdomain or two names are equal, which would take
// every policy's webhook down with it. A Policy "b" in namespace "team-a"
// and a ClusterPolicy "team-a-b" both read "-finegrained-team-a-b", and a
// long policy name in a long namespace overflows; such a name keeps as
// much of its readable form as fits and ends in a hash of the policy's
// key, which differs for every policy. keys[i] is own[i]'s policy key.
func uniqueWebhookNames(own []resourceWebhook, keys []string) {
	count := make(map[string]int, len(own))
	for _, w := range own {
		count[w.name]++
	}
	for i := range own {
		if count[own[i].name] == 1 && len(own[i].name) <= validation.DNS1123SubdomainMaxLength {
			continue
		}
		sum := sha256.Sum256([]byte(keys[i]))
		tail := "-" + hex.EncodeToString(sum[:5])
		readable := own[i].name
		if len(readable) > validation.DNS1123SubdomainMaxLength-len(tail) {
			readable = strings.TrimRight(readable[:validation.DNS1123SubdomainMaxLength-len(tail)], "-.")
		}
		own[i].name = readable + tail
	}
}

// Build computes the webhook configurations for the policies. Policies
// with spec.admission false are left out. A kind that does not resolve is
// listed in Unresolved and skipped; a resolver error fails the build, so a
// flaky discovery never publishes a configuration missing policies.
func Build(policies []kyvernov1.PolicyInterface, resolver Resolver, s Settings) (*Configurations, error) {
	validating := map[kyvernov1.FailurePolicyType]*webhookRules{kyvernov1.Fail: newWebhookRules(), kyvernov1.Ignore: newWebhookRules()}
	mutating := map[kyvernov1.FailurePolicyType]*webhookRules{kyvernov1.Fail: newWebhookRules(), kyvernov1.Ignore: newWebhookRules()}
	unresolved := map[string][]string{}
	var fine []*fineGrained
	namespaced := map[string]*namespaceRules{}
	for _, p := range policies {
		spec := p.GetSpec()
		if !spec.AdmissionProcessingEnabled() {
			continue
		}
		fp := spec.GetFailurePolicy()
		if fp != kyvernov1.Ignore {
			fp = kyvernov1.Fail
		}
		key := policyid.Key(p)
		// A policy with webhook matchConditions has webhooks of its own;
		// a namespaced one shares those of its namespace (and failure
		// policy); the others share their failure policy's.
		validating, mutating := validating, mutating
		ns := policyid.Namespace(p)
		switch {
		case webhookmatch.Has(p):
			f := &fineGrained{key: policyid.FineGrainedKey(p), namespace: ns, fp: fp, conditions: webhookmatch.Conditions(p), validating: newWebhookRules(), mutating: newWebhookRules()}
			f.namespaceSelector, f.objectSelector = webhookrules.Selectors(p)
			fine = append(fine, f)
			validating = map[kyvernov1.FailurePolicyType]*webhookRules{fp: f.validating}
			mutating = map[kyvernov1.FailurePolicyType]*webhookRules{fp: f.mutating}
		case p.IsNamespaced():
			if namespaced[ns] == nil {
				namespaced[ns] = newNamespaceRules()
			}
			validating, mutating = namespaced[ns].validating, namespaced[ns].mutating
		}
		usedV, usedM := false, false
		if celRules := webhookrules.ValidatingPolicy(p); celRules != nil {
			// A ValidatingPolicy names its resources, as a VAP does.
			usedV = addResourceRules(validating[fp], celRules, p.IsNamespaced(), validateOps)
		} else if celRules := webhookrules.GeneratingPolicy(p); celRules != nil {
			// So does a GeneratingPolicy; its one rule has no match kinds.
			usedV = addResourceRules(validating[fp], celRules, p.IsNamespaced(), validateOps)
		} else if celRules := webhookrules.ImageValidatingPolicy(p); celRules != nil {
			// So does an ImageValidatingPolicy, which verifies at the
			// validating webhook and, with mutateDigest, pins digests at
			// the mutating one.
			usedV = addResourceRules(validating[fp], celRules, p.IsNamespaced(), validateOps)
			if ip, ok := p.(policiesv1.ImageValidatingPolicyLike); ok && ip.GetImageValidatingPolicySpec().MutateDigest() {
				usedM = addResourceRules(mutating[fp], celRules, p.IsNamespaced(), mutateOps)
			}
		}
		if celRules := webhookrules.MutatingPolicy(p); celRules != nil {
			// So does a MutatingPolicy, as a MAP does.
			usedM = addResourceRules(mutating[fp], celRules, p.IsNamespaced(), mutateOps)
		}
		if celRules := webhookrules.MutateExistingTriggers(p); celRules != nil {
			// Its mutate-existing triggers reach the validating webhook,
			// which makes UpdateRequests of allowed requests.
			usedV = addResourceRules(validating[fp], celRules, p.IsNamespaced(), validateOps) || usedV
		}
		rules, err := autogen.ComputeRules(p)
		if err != nil {
			rules = spec.Rules
		}
		for i := range rules {
			r := &rules[i]
			isValidating := r.HasValidate() || r.HasGenerate() || r.HasMutateExisting() || r.HasVerifyImages()
			isMutating := r.HasMutateStandard() || r.HasVerifyImages()
			for _, f := range matchFilters(r) {
				for _, sel := range f.Kinds {
					resources, err := resolveSelector(resolver, sel)
					if err != nil {
						return nil, fmt.Errorf("policy %s rule %s: kind %q: %w", key, r.Name, sel, err)
					}
					if len(resources) == 0 {
						unresolved[key] = append(unresolved[key], sel)
						continue
					}
					for _, res := range resources {
						scope := admissionregistrationv1.AllScopes
						if p.IsNamespaced() {
							// A namespaced policy never sees a
							// cluster-scoped object, and a
							// namespaceSelector would not hold
							// its webhook back from one.
							if !res.Namespaced && !strings.HasPrefix(res.Resource, "*") {
								continue
							}
							scope = admissionregistrationv1.NamespacedScope
						} else if res.Namespaced {
							scope = admissionregistrationv1.NamespacedScope
						}
						if isValidating {
							validating[fp].add(res, scope, operations(f.Operations, validateOps))
							usedV = true
						}
						if isMutating {
							mutating[fp].add(res, scope, operations(f.Operations, mutateOps))
							usedM = true
						}
					}
				}
			}
		}
		timeout := DefaultTimeoutSeconds
		if t := spec.GetWebhookTimeoutSeconds(); t != nil {
			timeout = *t
		}
		if usedV {
			validating[fp].raise(timeout)
		}
		if usedM {
			mutating[fp].raise(timeout)
		}
	}
	validatingCfg := s.validating(validating, namespaced, fine)
	if s.Promotion && anyStaged(policies) {
		validatingCfg.Webhooks = append(validatingCfg.Webhooks, s.promotionWebhook())
	}
	return &Configurations{
		Validating:       validatingCfg,
		Mutating:         s.mutating(mutating, namespaced, fine),
		PolicyValidating: s.policyValidating(),
		Unresolved:       unresolved,
	}, nil
}

func (w *webhookRules) raise(timeout int32) {
	if timeout > w.timeout {
		w.timeout = min(timeout, MaxTimeoutSeconds)
	}
}

// addResourceRules registers a CEL policy's resource rules, with allOps
// for a rule that names no operation or "*"; a namespaced policy's only
// for namespaced resources.
func addResourceRules(w *webhookRules, rules []admissionregistrationv1.NamedRuleWithOperations, namespaced bool, allOps []admissionregistrationv1.OperationType) bool {
	used := false
	for _, r := range rules {
		scope := admissionregistrationv1.AllScopes
		if r.Scope != nil {
			scope = *r.Scope
		}
		if namespaced {
			scope = admissionregistrationv1.NamespacedScope
		}
		ops := allOps
		if len(r.Operations) > 0 && !slices.Contains(r.Operations, admissionregistrationv1.OperationAll) {
			ops = r.Operations
		}
		for _, g := range r.APIGroups {
			for _, v := range r.APIVersions {
				for _, res := range r.Resources {
					w.add(Resource{Group: g, Version: v, Resource: res}, scope, ops)
					used = true
				}
			}
		}
	}
	return used
}

// matchFilters returns the resource descriptions of a rule's match block.
func matchFilters(r *kyvernov1.Rule) []kyvernov1.ResourceDescription {
	var out []kyvernov1.ResourceDescription
	m := &r.MatchResources
	if len(m.ResourceDescription.Kinds) > 0 {
		out = append(out, m.ResourceDescription)
	}
	for _, f := range m.Any {
		out = append(out, f.ResourceDescription)
	}
	for _, f := range m.All {
		out = append(out, f.ResourceDescription)
	}
	return out
}

// operations returns the filter's operations, or the defaults.
func operations(ops []kyvernov1.AdmissionOperation, defaults []admissionregistrationv1.OperationType) []admissionregistrationv1.OperationType {
	if len(ops) == 0 {
		return defaults
	}
	out := make([]admissionregistrationv1.OperationType, 0, len(ops))
	for _, op := range ops {
		out = append(out, admissionregistrationv1.OperationType(op))
	}
	return out
}

// resolveSelector parses "[group/][version/]Kind[/subresource]" (the kind
// is the first part that starts with an upper-case letter or is "*") and
// resolves it.
func resolveSelector(resolver Resolver, sel string) ([]Resource, error) {
	parts := strings.Split(sel, "/")
	k := -1
	for i, p := range parts {
		if p == "*" || (p != "" && unicode.IsUpper([]rune(p)[0])) {
			k = i
			break
		}
	}
	if k < 0 {
		return nil, nil
	}
	var group, version, sub string
	switch k {
	case 1:
		// "v1/ReplicationController" names a version, "apps/Deployment" a group.
		if isVersion(parts[0]) {
			version = parts[0]
		} else {
			group = parts[0]
		}
	case 2:
		group, version = parts[0], parts[1]
	}
	if k+1 < len(parts) {
		sub = strings.Join(parts[k+1:], "/")
	} else if kind, s, ok := strings.Cut(parts[k], "."); ok {
		// "Pod.exec" is the other spelling of "Pod/exec".
		parts[k], sub = kind, s
	}
	if parts[k] == "*" {
		r := "*"
		if sub != "" {
			r = "*/*"
		}
		if group == "" {
			group = "*"
		}
		if version == "" {
			version = "*"
		}
		return []Resource{{Group: group, Version: version, Resource: r}}, nil
	}
	return resolver.Resolve(group, version, parts[k], sub)
}

// isVersion reports whether s looks like an API version: v1, v2beta1.
func isVersion(s string) bool {
	if len(s) < 2 || s[0] != 'v' || !unicode.IsDigit(rune(s[1])) {
		return false
	}
	rest := strings.TrimLeftFunc(s[1:], unicode.IsDigit)
	for _, q := range []string{"alpha", "beta"} {
		if strings.HasPrefix(rest, q) {
			rest = strings.TrimLeftFunc(rest[len(q):], unicode.IsDigit)
		}
	}
	return rest == ""
}

// namespaceSelector leaves the excluded namespaces out and, when only
// names namespaces, selects those only, by the name label the API server
// sets on every Namespace.
func (s Settings) namespaceSelector(only ...string) *metav1.LabelSelector {
	sel := &metav1.LabelSelector{}
	if len(only) > 0 {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: only})
	}
	// One NotIn expression per namespace, as Kyverno's chart writes them.
	for _, ns := range s.ExcludedNamespaces {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{ns}})
	}
	return sel
}

// webhookNamespaceSelector is namespaceSelector of the webhook's
// namespaces, narrowed by its own namespaceSelector: both must select.
func (s Settings) webhookNamespaceSelector(w resourceWebhook) *metav1.LabelSelector {
	sel := s.namespaceSelector(w.namespaces...)
	if own := w.namespaceSelector; own != nil {
		if len(own.MatchLabels) > 0 {
			sel.MatchLabels = maps.Clone(own.MatchLabels)
		}
		sel.MatchExpressions = append(sel.MatchExpressions, own.MatchExpressions...)
	}
	return sel
}

// webhookObjectSelector is the webhook's own objectSelector, or one
// selecting every object.
func (w resourceWebhook) webhookObjectSelector() *metav1.LabelSelector {
	if w.objectSelector != nil {
		return w.objectSelector.DeepCopy()
	}
	return &metav1.LabelSelector{}
}

func objectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: map[string]string{ManagedByLabel: ManagedByValue}}
}

// resourceWebhook is one resource webhook to write: a failure policy's
// shared one, namespaced policies' (namespaces set), or a policy's own
// (conditions set).
type resourceWebhook struct {
	name, path string
	fp         kyvernov1.FailurePolicyType
	rules      *webhookRules
	conditions []admissionregistrationv1.MatchCondition
	// namespaces, when set, are the only namespaces the webhook selects.
	namespaces []string
	// namespaceSelector and objectSelector, when set, narrow the
	// webhook to a policy's own (fineGrained).
	namespaceSelector, objectSelector *metav1.LabelSelector
}

// resourceWebhooks lists the webhooks of one configuration, the shared
// ones and the policies' own sorted by name as Kyverno sorts them: the
// Fail group's, the namespaced policies' of Fail, the policies' own of
// Fail, then the same of Ignore. base is "validate" or "mutate"; pick
// selects the namespaced and the fine-grained policies' rules of base.
func resourceWebhooks(base string, groups map[kyvernov1.FailurePolicyType]*webhookRules, namespaced map[string]*namespaceRules, fine []*fineGrained, pick picker) []resourceWebhook {
	var out []resourceWebhook
	for _, fp := range []kyvernov1.FailurePolicyType{kyvernov1.Fail, kyvernov1.Ignore} {
		name := base + ".charter.svc-" + strings.ToLower(string(fp))
		path := "/" + base + "/" + strings.ToLower(string(fp))
		out = append(out, resourceWebhook{name: name, path: path, fp: fp, rules: groups[fp]})
		out = append(out, namespacedGroups(name, path, fp, namespaced, pick)...)
		var own []resourceWebhook
		var keys []string
		for _, f := range fine {
			if f.fp != fp {
				continue
			}
			n, p := f.suffix()
			var only []string
			if f.namespace != "" {
				only = []string{f.namespace}
			}
			own = append(own, resourceWebhook{name: name + n, path: path + p, fp: fp, rules: pick.fine(f), conditions: f.conditions, namespaces: only,
				namespaceSelector: f.namespaceSelector, objectSelector: f.objectSelector})
			keys = append(keys, f.key)
		}
		uniqueWebhookNames(own, keys)
		sort.Slice(own, func(i, j int) bool { return own[i].name < own[j].name })
		out = append(out, own...)
	}
	return out
}

// notNodes keeps Node objects away from a webhook whose rules name every
// resource ("*"): charter's request filter admits Nodes unevaluated
// (server.DefaultResourceFilters), so routing them would only let a
// charter outage under failurePolicy Fail stop kubelets from registering
// and updating their Nodes (kyverno#16177). Rules that name nodes are not
// registered at all (webhookRules.add).
var notNodes = admissionregistrationv1.MatchCondition{
	Name:       "charter.dev/not-nodes",
	Expression: "!(request.resource.group == '' && request.resource.resource == 'nodes')",
}

// maxMatchConditions is how many matchConditions the API server accepts
// on one webhook.
const maxMatchConditions = 64

// isNodes reports whether a rule's group and resource name Nodes or a
// subresource of theirs.
func isNodes(group, resource string) bool {
	return group == "" && (resource == "nodes" || strings.HasPrefix(resource, "nodes/"))
}

// matchConditions are a webhook's conditions: its own, and notNodes when
// its rules may match Nodes. A policy's own webhook may already hold the
// most conditions the API server accepts; notNodes then joins the first,
// since a configuration the API server refuses would take every policy's
// webhook down.
func matchConditions(rules []admissionregistrationv1.RuleWithOperations, own []admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition {
	if !mayMatchNodes(rules) {
		return own
	}
	if len(own) < maxMatchConditions {
		return append(slices.Clone(own), notNodes)
	}
	out := slices.Clone(own)
	out[0].Expression = "(" + notNodes.Expression + ") && (" + out[0].Expression + ")"
	return out
}

// mayMatchNodes reports whether a rule names every resource of the core
// group.
func mayMatchNodes(rules []admissionregistrationv1.RuleWithOperations) bool {
	for _, r := range rules {
		if (slices.Contains(r.APIGroups, "") || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Resources, "*") || slices.Contains(r.Resources, "*/*")) {
			return true
		}
	}
	return false
}

func (s Settings) validating(groups map[kyvernov1.FailurePolicyType]*webhookRules, namespaced map[string]*namespaceRules, fine []*fineGrained) *admissionregistrationv1.ValidatingWebhookConfiguration {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: objectMeta(ResourceValidatingName),
		Webhooks: []admissionregistrationv1.ValidatingWebhook{}}
	sideEffects := admissionregistrationv1.SideEffectClassNoneOnDryRun
	equivalent := admissionregistrationv1.Equivalent
	for _, g := range resourceWebhooks("validate", groups, namespaced, fine, validatingRules) {
		rules := g.rules.rules()
		if len(rules) == 0 {
			continue
		}
		fp := admissionregistrationv1.FailurePolicyType(g.fp)
		timeout := g.rules.timeout
		cfg.Webhooks = append(cfg.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name: g.name, ClientConfig: s.Target.clientConfig(g.path, s.CABundle), Rules: rules,
			FailurePolicy: &fp, MatchPolicy: &equivalent, NamespaceSelector: s.webhookNamespaceSelector(g),
			ObjectSelector: g.webhookObjectSelector(), SideEffects: &sideEffects, TimeoutSeconds: &timeout,
			AdmissionReviewVersions: []string{"v1"}, MatchConditions: matchConditions(rules, g.conditions),
		})
	}
	return cfg
}

func (s Settings) mutating(groups map[kyvernov1.FailurePolicyType]*webhookRules, namespaced map[string]*namespaceRules, fine []*fineGrained) *admissionregistrationv1.MutatingWebhookConfiguration {
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: objectMeta(ResourceMutatingName),
		Webhooks: []admissionregistrationv1.MutatingWebhook{}}
	sideEffects := admissionregistrationv1.SideEffectClassNoneOnDryRun
	equivalent := admissionregistrationv1.Equivalent
	reinvoke := admissionregistrationv1.IfNeededReinvocationPolicy
	for _, g := range resourceWebhooks("mutate", groups, namespaced, fine, mutatingRules) {
		rules := g.rules.rules()
		if len(rules) == 0 {
			continue
		}
		fp := admissionregistrationv1.FailurePolicyType(g.fp)
		timeout := g.rules.timeout
		cfg.Webhooks = append(cfg.Webhooks, admissionregistrationv1.MutatingWebhook{
			Name: g.name, ClientConfig: s.Target.clientConfig(g.path, s.CABundle), Rules: rules,
			FailurePolicy: &fp, MatchPolicy: &equivalent, NamespaceSelector: s.webhookNamespaceSelector(g),
			ObjectSelector: g.webhookObjectSelector(), SideEffects: &sideEffects, TimeoutSeconds: &timeout,
			AdmissionReviewVersions: []string{"v1"}, ReinvocationPolicy: &reinvoke, MatchConditions: matchConditions(rules, g.conditions),
		})
	}
	return cfg
}

// policyValidating routes ClusterPolicy, Policy, PolicyException,
// CleanupPolicy, ClusterCleanupPolicy and GlobalContextEntry writes, in
// every version charter serves (api/versions), to /policyvalidate,
// failing closed so an invalid policy, or one charter cannot enforce,
// never lands, and labelled objects to /verifyttl (ttlWebhook).
func (s Settings) policyValidating() *admissionregistrationv1.ValidatingWebhookConfiguration {
	fp := admissionregistrationv1.Fail
	sideEffects := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	timeout := DefaultTimeoutSeconds
	ops := []admissionregistrationv1.OperationType{"CREATE", "UPDATE"}
	all := admissionregistrationv1.AllScopes
	return &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: objectMeta(PolicyValidatingName),
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: PolicyWebhook, ClientConfig: s.Target.clientConfig("/policyvalidate", s.CABundle),
			Rules: []admissionregistrationv1.RuleWithOperations{
				{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{"kyverno.io"}, APIVersions: []string{"v1", "v2beta1"},
					Resources: []string{"clusterpolicies", "policies"}, Scope: &all}},
				{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{"kyverno.io"}, APIVersions: []string{"v2", "v2beta1"},
					Resources: []string{"policyexceptions"}, Scope: &all}},
				{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{"policies.kyverno.io"}, APIVersions: []string{"v1", "v1beta1", "v1alpha1"},
					Resources: []string{"validatingpolicies", "namespacedvalidatingpolicies", "generatingpolicies", "namespacedgeneratingpolicies",
						"deletingpolicies", "namespaceddeletingpolicies", "mutatingpolicies", "namespacedmutatingpolicies", "imagevalidatingpolicies", "namespacedimagevalidatingpolicies", "policyexceptions"}, Scope: &all}},
				// GlobalContextEntries are checked as the Store loads them
				// (Kyverno's /globalcontextvalidate).
				{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{"kyverno.io"}, APIVersions: []string{"v2alpha1", "v2beta1", "v2"},
					Resources: []string{"globalcontextentries"}, Scope: &all}},
				// Cleanup policies are checked for what charter cannot run.
				{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{"kyverno.io"}, APIVersions: []string{"v2", "v2beta1"},
					Resources: []string{"cleanuppolicies", "clustercleanuppolicies"}, Scope: &all}},
			},
			FailurePolicy: &fp, MatchPolicy: &equivalent, SideEffects: &sideEffects, TimeoutSeconds: &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}, s.ttlWebhook()}}
}

// ttlWebhook routes CREATE and UPDATE of objects of every kind that carry
// the cleanup.kyverno.io/ttl label (old or new: the API server matches an
// objectSelector against both) to /verifyttl, which refuses values the
// cleanup controller could not read. Objects without the label never
// reach charter. It fails open, unlike the policy webhook: it would
// otherwise stop every labelled object from being written while charter
// is down, and a value that slips through is reported by the cleanup
// controller with an event on the object and never acted on.
func (s Settings) ttlWebhook() admissionregistrationv1.ValidatingWebhook {
	fp := admissionregistrationv1.Ignore
	sideEffects := admissionregistrationv1.SideEffectClassNone
	equivalent := admissionregistrationv1.Equivalent
	timeout := DefaultTimeoutSeconds
	all := admissionregistrationv1.AllScopes
	return admissionregistrationv1.ValidatingWebhook{
		Name: TTLWebhook, ClientConfig: s.Target.clientConfig("/verifyttl", s.CABundle),
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}, Scope: &all},
		}},
		FailurePolicy: &fp, MatchPolicy: &equivalent, NamespaceSelector: s.namespaceSelector(),
		ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: ttl.Label, Operator: metav1.LabelSelectorOpExists}}},
		SideEffects: &sideEffects, TimeoutSeconds: &timeout, AdmissionReviewVersions: []string{"v1"},
	}
}
