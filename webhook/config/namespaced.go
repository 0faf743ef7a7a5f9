package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"sort"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// The webhooks of namespaced policies (Policy and the Namespaced
// policies.kyverno.io kinds) select their own namespaces only. Were a
// tenant's policy merged into its failure policy's shared webhook, as
// Kyverno does, a Policy matching "*" with failurePolicy Fail would widen
// that webhook to every namespace, and a charter outage would then block
// writes cluster-wide; its timeout would slow every namespace's requests
// too.
//
// One webhook per namespace would grow the configurations with the
// number of tenants (each webhook carries the CA bundle, and the API
// server refuses an object over its size limit), so the namespaces whose
// namespaced policies of one failure policy register exactly the same
// rules and timeout share one webhook, whose namespaceSelector lists them:
// a thousand tenants with the same policies make one webhook per failure
// policy. A namespace whose rules differ has a webhook of its own, so one
// tenant's policies never change what another's webhook matches. Every
// such webhook calls /<base>/<fp>/namespaced, which evaluates the request
// namespace's namespaced policies of that failure policy.

// namespaceRules are the rules of one namespace's namespaced policies
// without webhook matchConditions, by failure policy.
type namespaceRules struct {
	validating, mutating map[kyvernov1.FailurePolicyType]*webhookRules
}

func newNamespaceRules() *namespaceRules {
	return &namespaceRules{
		validating: map[kyvernov1.FailurePolicyType]*webhookRules{kyvernov1.Fail: newWebhookRules(), kyvernov1.Ignore: newWebhookRules()},
		mutating:   map[kyvernov1.FailurePolicyType]*webhookRules{kyvernov1.Fail: newWebhookRules(), kyvernov1.Ignore: newWebhookRules()},
	}
}

// picker selects the rules of one configuration (validating or mutating)
// from namespaced and fine-grained policies.
type picker struct {
	namespace func(*namespaceRules) map[kyvernov1.FailurePolicyType]*webhookRules
	fine      func(*fineGrained) *webhookRules
}

var (
	validatingRules = picker{
		namespace: func(n *namespaceRules) map[kyvernov1.FailurePolicyType]*webhookRules { return n.validating },
		fine:      func(f *fineGrained) *webhookRules { return f.validating },
	}
	mutatingRules = picker{
		namespace: func(n *namespaceRules) map[kyvernov1.FailurePolicyType]*webhookRules { return n.mutating },
		fine:      func(f *fineGrained) *webhookRules { return f.mutating },
	}
)

// NamespacedSegment ends the path of the namespaced policies' webhooks
// (webhook/server.NamespacedSegment).
const NamespacedSegment = "/namespaced"

// namespacedGroups returns the webhooks of the namespaced policies of
// failure policy fp, one per distinct (rules, timeout), sorted by name:
// <name>-namespaced-<hash of the rules>, on <path>/namespaced, selecting
// the namespaces that register those rules.
func namespacedGroups(name, path string, fp kyvernov1.FailurePolicyType, namespaced map[string]*namespaceRules, pick picker) []resourceWebhook {
	type group struct {
		rules      *webhookRules
		namespaces []string
	}
	groups := map[string]*group{}
	for _, ns := range slices.Sorted(maps.Keys(namespaced)) {
		rules := pick.namespace(namespaced[ns])[fp]
		list := rules.rules()
		if len(list) == 0 {
			continue
		}
		// The rules are sorted and deduplicated (webhookRules.rules), so
		// equal registrations print equal.
		printed, err := json.Marshal(struct {
			Rules   any   `json:"rules"`
			Timeout int32 `json:"timeout"`
		}{list, rules.timeout})
		if err != nil {
			panic("config: marshalling webhook rules: " + err.Error())
		}
		sum := sha256.Sum256(printed)
		key := hex.EncodeToString(sum[:5])
		if groups[key] == nil {
			groups[key] = &group{rules: rules}
		}
		groups[key].namespaces = append(groups[key].namespaces, ns)
	}
	out := make([]resourceWebhook, 0, len(groups))
	for key, g := range groups {
		out = append(out, resourceWebhook{name: name + "-namespaced-" + key, path: path + NamespacedSegment, fp: fp, rules: g.rules, namespaces: g.namespaces})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}
