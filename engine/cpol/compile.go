package cpol

import (
	"fmt"
	"slices"
	"strings"

	"github.com/charter-dev/charter/api/charter"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/autogen"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/jmespath"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/policyid"
	"github.com/charter-dev/charter/engine/review"
)

// Policy is a compiled kyverno.io ClusterPolicy or Policy: its spec
// and its rules, autogen rules included, with what its evaluation reads of
// the policy as written.
type Policy struct {
	source kyvernov1.PolicyInterface
	// key names the policy in exceptions and messages (policyid.Key), id
	// scopes its image verifications (policyid.Of).
	key, id string
	// unscored policies (policies.kyverno.io/scored: "false") report warn
	// instead of fail.
	unscored bool
	// staged policies (charter.dev/staged: "true") enforce in namespaces
	// labelled for enforcement (action.go).
	staged bool
	spec   *kyvernov1.Spec
	// namespace is the namespace a namespaced policy (kyverno.io/v1
	// Policy) acts in, "" for a cluster-wide one.
	namespace string
	rules     []*rule
	// kinds are the kind names (no group/version) the rules select; "*"
	// when a rule selects any kind.
	kinds []string
	// webhookConditions are spec.webhookConfiguration.matchConditions
	// (webhookconditions.go); nil when there are none.
	webhookConditions *webhookConditions
	// readsRoles is true when a rule matches or excludes by roles or
	// clusterRoles, or reads request.roles or request.clusterRoles: only
	// then does the admission server resolve the requester's roles.
	readsRoles bool
}

// Compile checks and compiles a kyverno.io ClusterPolicy or
// Policy whose key is key, with the set's JMESPath interpreter and compile
// Cache (nil compiles uncached).
func Compile(src kyvernov1.PolicyInterface, key string, jp *jmespath.Interpreter, cache *celruntime.Cache) (*Policy, fault.List) {
	cp := &Policy{
		source:    src,
		key:       key,
		id:        policyid.Of(src),
		unscored:  src.GetAnnotations()[kyvernov1.AnnotationPolicyScored] == "false",
		staged:    charter.IsStaged(src.GetLabels()),
		spec:      src.GetSpec(),
		namespace: policyid.Namespace(src),
	}
	fail := &fault.Collector{Kind: src.GetKind(), Name: key}
	if len(cp.spec.Rules) == 0 {
		fail.Add("spec.rules", "a policy needs at least one rule")
	}
	if a := cp.spec.ValidationFailureAction; a != "" && !a.IsValid() {
		fail.Add("spec.validationFailureAction", fmt.Sprintf("unknown action %q, want Audit or Enforce", a))
	}
	if cp.spec.GenerateExistingOnPolicyUpdate != nil {
		// Kyverno refuses the old name, whatever its value, and no longer
		// reads it (background-cleanup.md §3.4).
		fail.Add("spec.generateExistingOnPolicyUpdate", "the deprecated field is refused, as in Kyverno: remove it and set generateExisting on each generate rule (spec.rules[*].generate.generateExisting) instead")
	}
	checkSpec(cp, fail)
	rc := &Compiler{JP: jp, Cache: cache}
	cp.webhookConditions = compileWebhookConditions(cp.spec.GetMatchConditions(), cache, fail)
	rules, err := autogen.ComputeRules(src)
	if err != nil {
		fail.Add("spec.rules", "autogen: "+err.Error())
		return nil, fail.Errs
	}
	specIndex := make(map[string]int, len(cp.spec.Rules))
	for i := range cp.spec.Rules {
		specIndex[cp.spec.Rules[i].Name] = i
	}
	seen := map[string]bool{}
	generated := 0
	for i := range rules {
		r := &rules[i]
		var path string
		if j, ok := specIndex[r.Name]; ok && !autogen.IsGenerated(r.Name) {
			path = fmt.Sprintf("spec.rules[%d]", j)
		} else {
			// Generated rules are published in status.autogen.rules.
			path = fmt.Sprintf("status.autogen.rules[%d]", generated)
			generated++
			if len(fail.Errs) > 0 {
				// Their faults repeat those of their source rule.
				continue
			}
		}
		if seen[r.Name] {
			fail.Add(path+".name", fmt.Sprintf("duplicate rule name %q", r.Name))
		}
		seen[r.Name] = true
		if cr := rc.compileRule(cp, r, path, !strings.HasPrefix(path, "spec."), fail); cr != nil {
			cp.rules = append(cp.rules, cr)
		}
	}
	if len(fail.Errs) > 0 {
		return nil, fail.Errs
	}
	cp.kinds = policyKinds(cp.rules)
	return cp, nil
}

// ConditionsHold reports whether the policy's webhook matchConditions hold
// for the request; true for a policy of another kind (nil).
func (cp *Policy) ConditionsHold(in *review.View) bool {
	return cp == nil || cp.webhookConditions.holds(in)
}

// ruleList returns the compiled rules; none for a policy of another kind
// (nil).
func (cp *Policy) ruleList() []*rule {
	if cp == nil {
		return nil
	}
	return cp.rules
}

// RuleNames returns the names of the compiled rules, in evaluation order;
// an empty list for a policy of another kind (nil).
func (cp *Policy) RuleNames() []string {
	rules := cp.ruleList()
	names := make([]string, len(rules))
	for i, r := range rules {
		names[i] = r.name
	}
	return names
}

// Kinds are the kind names (no group/version) the rules select; "*" when
// a rule selects any kind.
func (cp *Policy) Kinds() []string { return cp.kinds }

// ReadsRoles reports whether a rule matches or excludes by roles or
// clusterRoles, or reads request.roles or request.clusterRoles: only then
// does the admission server resolve the requester's roles. False for a
// policy of another kind (nil).
func (cp *Policy) ReadsRoles() bool { return cp != nil && cp.readsRoles }

// WebhookConditioned reports whether the policy has webhook
// matchConditions (spec.webhookConfiguration.matchConditions); false for
// a policy of another kind (nil).
func (cp *Policy) WebhookConditioned() bool { return cp != nil && cp.webhookConditions != nil }

// Selects reports whether a rule of the policy selects the resource (its
// match and exclude blocks); false for a policy of another kind (nil).
func (cp *Policy) Selects(res *match.Resource) bool {
	return slices.ContainsFunc(cp.ruleList(), func(r *rule) bool { return r.selects(res) })
}
