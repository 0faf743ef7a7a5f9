package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/autogen"
)

// PolicyRuleInfo is the name of the rule info gauge. Kyverno exports an
// observable gauge under a counter's name, and so does charter.
const PolicyRuleInfo = "kyverno_policy_rule_info_total"

var ruleInfoLabels = [...]string{"rule_name", "rule_type", "policy_namespace", "policy_name", "status_ready",
	"policy_validation_mode", "policy_type", "policy_background_mode"}

// PolicyState is one installed policy as kyverno_policy_rule_info_total
// describes it.
type PolicyState struct {
	Policy kyvernov1.PolicyInterface
	// Ready is the status_ready label: whether the policy is in force.
	Ready bool
}

// PolicyInventory returns the installed policies when the rule info is
// scraped. It must be cheap and must not block for long: it runs on
// every scrape.
type PolicyInventory func() ([]PolicyState, error)

// SetPolicyInventory makes kyverno_policy_rule_info_total report, on each
// scrape, one sample of value 1 per rule of every policy inv returns,
// autogen rules included. Until it is called the gauge has no series.
func (r *Recorder) SetPolicyInventory(inv PolicyInventory) {
	if r != nil {
		r.ruleInfo.inventory.Store(&inv)
	}
}

// ruleInfoCollector computes kyverno_policy_rule_info_total on scrape.
type ruleInfoCollector struct {
	desc      *prometheus.Desc
	inventory atomic.Pointer[PolicyInventory]

	// mu guards rules: the rules of each policy generation seen at the
	// last scrape. Expanding autogen rules encodes every Pod rule
	// as JSON; a scrape repeats it only for policies that changed.
	mu    sync.Mutex
	rules map[ruleCacheKey][]ruleInfo
}

type ruleCacheKey struct {
	uid        types.UID
	generation int64
}

// ruleInfo is the name and type of one rule.
type ruleInfo struct{ name, typ string }

func newRuleInfoCollector() *ruleInfoCollector {
	return &ruleInfoCollector{
		desc: prometheus.NewDesc(PolicyRuleInfo, "One per rule of every installed policy, autogen rules included.",
			ruleInfoLabels[:], scope),
	}
}

func (c *ruleInfoCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *ruleInfoCollector) Collect(ch chan<- prometheus.Metric) {
	inv := c.inventory.Load()
	if inv == nil {
		return
	}
	policies, err := (*inv)()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Entries of policies deleted or changed since the last scrape go.
	seen := make(map[ruleCacheKey][]ruleInfo, len(policies))
	// Policies of different kinds may share a name (a ClusterPolicy with
	// a generate rule named after it and the GeneratingPolicy of that
	// name, whose one rule bears its name): the labels carry no kind, so
	// such a pair gives one series, sent once, since a registry refuses
	// the whole scrape when a series repeats.
	sent := map[[len(ruleInfoLabels)]string]bool{}
	for _, ps := range policies {
		p := ps.Policy
		rules := c.rulesOf(p, seen)
		pl := policyLabels(p)
		ready := strconv.FormatBool(ps.Ready)
		for _, rule := range rules {
			values := [len(ruleInfoLabels)]string{rule.name, rule.typ, pl.namespace, pl.name, ready, pl.mode, pl.typ, pl.background}
			if sent[values] {
				continue
			}
			sent[values] = true
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, values[:]...)
		}
	}
	c.rules = seen
}

// rulesOf returns p's rules after autogen expansion, from the last
// scrape's entries when p's generation has not changed, and records them
// in seen. A policy without UID or generation (not from an API server)
// is expanded every time.
func (c *ruleInfoCollector) rulesOf(p kyvernov1.PolicyInterface, seen map[ruleCacheKey][]ruleInfo) []ruleInfo {
	key := ruleCacheKey{uid: p.GetUID(), generation: p.GetGeneration()}
	cacheable := key.uid != "" && key.generation != 0
	if cacheable {
		if rules, ok := c.rules[key]; ok {
			seen[key] = rules
			return rules
		}
	}
	rules := expandRules(p)
	if cacheable {
		seen[key] = rules
	}
	return rules
}

// expandRules lists p's rules and the rules autogen generates from them.
// When the generated rules cannot be computed, the policy's own rules are
// listed: the policy is there, even if its Pod controller rules are not.
func expandRules(p kyvernov1.PolicyInterface) []ruleInfo {
	if _, ok := p.(policiesv1.ValidatingPolicyLike); ok {
		// One result per request, under rule "" (as in its reports),
		// autogen copies included.
		return []ruleInfo{{name: "", typ: "validate"}}
	}
	if _, ok := p.(policiesv1.MutatingPolicyLike); ok {
		return []ruleInfo{{name: "", typ: "mutate"}}
	}
	if _, ok := p.(policiesv1.ImageValidatingPolicyLike); ok {
		// One result per request, under the policy's name.
		return []ruleInfo{{name: p.GetName(), typ: "imageVerify"}}
	}
	rules, err := autogen.ComputeRules(p)
	if err != nil {
		rules = p.GetSpec().Rules
	}
	out := make([]ruleInfo, len(rules))
	for i := range rules {
		out[i] = ruleInfo{name: rules[i].Name, typ: specRuleType(&rules[i])}
	}
	return out
}

// specRuleType is the rule_type of a rule as written, in the order
// Kyverno tests a rule's sections.
func specRuleType(r *kyvernov1.Rule) string {
	switch {
	case r.HasValidate():
		return "validate"
	case r.HasMutate():
		return "mutate"
	case r.HasGenerate():
		return "generate"
	case r.HasVerifyImages():
		return "imageVerify"
	}
	return "-"
}
