package engine

import (
	"slices"
	"strings"

	"github.com/charter-dev/charter/engine/match"
)

// A request is evaluated against the policies that can select it. With a
// thousand policies installed most cannot: they concern other kinds, or
// the same kinds in other teams' namespaces, and asking each of them on
// every request made a review's cost grow with every policy installed
// (issue 33: about 1 µs per policy per review). So index sorts each
// policy, once when the set is built, into the buckets of the requests it
// can select, and candidates reads a handful of buckets per request:
//
//   - by kind: the kind names its rules select (Policy.kinds), or the
//     wildcard buckets when one of them selects any kind;
//   - within a kind, by namespace: a namespaced policy (kyverno.io/v1
//     Policy and the namespaced CEL kinds) under its own namespace, since
//     it sees only requests acting there (scopes); a cluster-wide policy
//     whose every rule matches only namespaces named exactly (no
//     wildcard) under each of them; every other policy (selectors,
//     wildcards, no namespaces, the CEL kinds' matchConstraints) in the
//     bucket every request of the kind reads.
//
// A bucket may hold policies that then do not match (an exclude, a
// selector, another filter's criteria): the rules still decide, as
// before. The index only leaves out policies no rule of which can match.

// policyList is one bucket: policies in compile order and how many
// validate responses they can give at most (validateResponses), which
// Validate makes room for up front.
type policyList struct {
	policies  []*Policy
	responses int
}

// kindIndex holds the policies of one kind (or of any kind) by the
// namespace of the requests they can select.
type kindIndex struct {
	// anyNamespace holds the policies that can select a request of the
	// kind in any namespace.
	anyNamespace policyList
	// byNamespace holds the cluster-wide policies whose every rule
	// matches only the namespaces named, under each of them; a request
	// reads the bucket of match.NamespaceOf (a Namespace object its own
	// name).
	byNamespace map[string]*policyList
	// byScope holds the namespaced policies under the namespace they act
	// in; a request reads the bucket of its scope (scopeNamespace).
	byScope map[string]*policyList
}

func (k *kindIndex) add(p *Policy, responses int) {
	if p.namespace != "" {
		k.byScope = addTo(k.byScope, p.namespace, p, responses)
		return
	}
	if namespaces, ok := policyNamespaces(p); ok {
		for _, ns := range namespaces {
			k.byNamespace = addTo(k.byNamespace, ns, p, responses)
		}
		return
	}
	k.anyNamespace.policies = append(k.anyNamespace.policies, p)
	k.anyNamespace.responses += responses
}

func addTo(m map[string]*policyList, key string, p *Policy, responses int) map[string]*policyList {
	if m == nil {
		m = map[string]*policyList{}
	}
	l := m[key]
	if l == nil {
		l = &policyList{}
		m[key] = l
	}
	if !slices.Contains(l.policies, p) {
		l.policies = append(l.policies, p)
		l.responses += responses
	}
	return m
}

// lists appends to out the buckets of k that can hold policies selecting
// the request: those of its namespace and scope, or with anyNamespace
// every bucket (for a request whose namespace may change under
// evaluation). Empty buckets are left out.
func (k *kindIndex) lists(out []*policyList, in *requestView, anyNamespace bool) []*policyList {
	if len(k.anyNamespace.policies) > 0 {
		out = append(out, &k.anyNamespace)
	}
	if anyNamespace {
		for _, m := range []map[string]*policyList{k.byNamespace, k.byScope} {
			for _, l := range m {
				out = append(out, l)
			}
		}
		return out
	}
	if l := k.byNamespace[match.NamespaceOf(&in.Res)]; l != nil {
		out = append(out, l)
	}
	if in.Scope != "" {
		if l := k.byScope[in.Scope]; l != nil {
			out = append(out, l)
		}
	}
	return out
}

// index adds p to the buckets of the requests it can select.
func (s *PolicySet) index(p *Policy) {
	p.order = len(s.policies) - 1
	if p.cpol != nil && p.cpol.WebhookConditioned() {
		s.webhookConditioned++
	}
	if p.background {
		s.background = append(s.background, p)
	}
	for _, k := range p.kinds {
		if k == "*" || strings.ContainsAny(k, "*?") {
			s.wildcard.add(p, validateResponses(p, ""))
			return
		}
	}
	if s.byKind == nil {
		s.byKind = map[string]*kindIndex{}
	}
	for _, k := range p.kinds {
		ki := s.byKind[k]
		if ki == nil {
			ki = &kindIndex{}
			s.byKind[k] = ki
		}
		ki.add(p, validateResponses(p, k))
	}
}

// buckets returns the buckets that can hold policies selecting the
// request, in buf.
func (s *PolicySet) buckets(buf []*policyList, in *requestView, anyNamespace bool) []*policyList {
	if k := s.byKind[in.GVK.Kind]; k != nil {
		buf = k.lists(buf, in, anyNamespace)
	}
	return s.wildcard.lists(buf, in, anyNamespace)
}

// candidates returns the policies that can select the request, in compile
// order. The slice may be the index's own: callers do not change it.
func (s *PolicySet) candidates(in *requestView) []*Policy {
	return s.candidatesIn(in, false)
}

// candidatesIn is candidates; with anyNamespace, the policies of the
// request's kind in every namespace.
func (s *PolicySet) candidatesIn(in *requestView, anyNamespace bool) []*Policy {
	var buf [6]*policyList
	lists := s.buckets(buf[:0], in, anyNamespace)
	var out []*Policy
	switch len(lists) {
	case 0:
	case 1:
		out = lists[0].policies
	default:
		n := 0
		for _, l := range lists {
			n += len(l.policies)
		}
		out = make([]*Policy, 0, n)
		for _, l := range lists {
			out = append(out, l.policies...)
		}
		slices.SortFunc(out, func(a, b *Policy) int { return a.order - b.order })
		// With anyNamespace, a policy of several namespaces is in the
		// bucket of each.
		out = slices.Compact(out)
	}
	if s.webhookConditioned == 0 || in.Opts.WebhookConditionsMet {
		return out
	}
	// A policy whose webhook matchConditions do not hold for the request
	// is no candidate (engine/cpol's webhookconditions.go); out may be an index slice,
	// so the kept policies go to a copy.
	return slices.DeleteFunc(slices.Clone(out), func(p *Policy) bool { return !p.cpol.ConditionsHold(&in.View) })
}

// rulesUpFront makes room in in.rules for the rule responses Validate may
// get, and returns how many it made room for: at most one per validate
// (or verifyImages) rule of the candidate policies that can select its
// kind, and one per CEL policy, as index counted them
// (restrict-capabilities-strict answers a Pod with two rules, its autogen
// rules none), up to a bound: a large set's candidates may mostly not
// respond, and room for more is made a block at a time when they come
// (review.RuleBuffer). A review of the Pod Security set needs 18 of the
// 200-byte responses: room for exactly those is 1 KiB less than a guess
// from the number of candidate policies.
func (s *PolicySet) rulesUpFront(in *requestView) int {
	var buf [6]*policyList
	n := 0
	for _, l := range s.buckets(buf[:0], in, false) {
		n += l.responses
	}
	return in.rules.Expect(n)
}

// policyNamespaces returns the namespaces a cluster-wide policy's rules
// can match, when every rule matches only namespaces named exactly; false
// when some rule can match a namespace not named (no namespaces, a
// wildcard, a selector alone), and for the CEL kinds, which match by
// their own constraints.
func policyNamespaces(p *Policy) ([]string, bool) {
	if p.cpol == nil {
		return nil, false
	}
	return p.cpol.Namespaces()
}

// BackgroundPolicies returns the policies of the set with a generate or
// mutate-existing rule in their spec, in compile order: the admission
// server asks on every admitted request whether the background controller
// has work, and that must not cost a look at every installed policy.
func (s *PolicySet) BackgroundPolicies() []*Policy { return s.background }
