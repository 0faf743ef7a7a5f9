// Package policycache is the one watch of installed policies in a
// process, and the one compile of them: informers on ClusterPolicy,
// Policy, the policies.kyverno.io kinds, both groups' PolicyExceptions and
// Namespace (and the changes of the params a policy may read, see
// Cache.ParamChanged) feed a debounced rebuild that compiles what changed,
// and the result is published as an immutable Snapshot swapped in
// atomically, so in-flight requests never wait for a compile and never see
// half of one.
// The Snapshot holds the admission sets and the views the other
// controllers of the process evaluate (reports, background), which
// subscribe to it (Cache.Subscribe) instead of compiling their own; every
// rebuild also publishes the Installed objects, for those that read the
// objects themselves (cleanup, params).
package policycache

import (
	"maps"
	"slices"
	"sort"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/fault"
)

// Snapshot is one compiled generation of the installed policies, split by
// the webhook failure policy they ask for: the API server calls
// /validate/fail for the policies of Fail and /validate/ignore for those
// of Ignore, and each path must see only its own policies. Namespaced
// policies are split by namespace too (Namespaced). It also carries the
// views the other controllers of the process evaluate (Background,
// Reports) and every policy's compiled unit (Compiled, which policy status
// reads): all assembled from one compile of each policy and exception.
//
// A Snapshot is immutable and safe for concurrent use.
type Snapshot struct {
	// Fail holds the cluster-wide policies whose failurePolicy is Fail
	// (the default).
	Fail *engine.PolicySet
	// Ignore holds the cluster-wide policies whose failurePolicy is
	// Ignore.
	Ignore *engine.PolicySet
	// Namespaced holds, by namespace, the namespaced policies (Policy and
	// the Namespaced policies.kyverno.io kinds) without webhook
	// matchConditions. They are served on paths of their own
	// (/validate/fail/namespaced...) through webhooks whose
	// namespaceSelector selects their namespaces only, so a tenant's
	// policy never widens a webhook, or slows a request, beyond its own
	// namespace. A namespace without such policies has no entry.
	Namespaced map[string]NamespaceSets
	// FineGrained holds, by policyid.FineGrainedKey, each policy whose
	// webhook carries conditions (webhookmatch.Has: a
	// ClusterPolicy's spec.webhookConfiguration.matchConditions, a CEL
	// policy's spec.matchConditions) in a set of its own: the
	// API server sends it only the requests its conditions select, through
	// a webhook of its own (Kyverno's fine-grained webhook), so it is in
	// neither Fail nor Ignore.
	FineGrained map[string]FineGrainedSet
	// Errors lists the policies and exceptions that did not compile; they
	// are left out of the sets. Policy status reports them.
	Errors fault.List
	// Generation counts the snapshots a Cache has published, starting at 1.
	Generation uint64
	// Background is the background controller's view: every policy with
	// generate or mutate-existing rules (HasBackgroundRules), admission or
	// not, bound to the exceptions of both groups.
	Background ControllerView
	// Reports is the background scan's view: every policy it evaluates
	// (IsScanned), by policyid.Of, bound to the kyverno.io exceptions
	// with spec.background (default true) and to the policies.kyverno.io
	// exceptions.
	Reports ControllerView
	// Installed is what the snapshot was built from.
	Installed *Installed
	// units are the compiled units of every installed policy, by
	// policyid.Of (see Compiled).
	units map[string]*engine.CompiledPolicy
	// readsRoles is whether a policy of the admission sets reads the
	// requester's roles (see ReadsRoles).
	readsRoles bool
	// params counts, by policyid.Of, the changes of the params each
	// policy may read (see ParamGeneration).
	params map[string]uint64
}

// ReadsRoles reports whether any policy the snapshot serves at admission
// matches by, or reads, the requester's roles or cluster roles
// (engine.Policy.ReadsRoles); when none does, the admission server skips
// the RBAC lookups. It is decided when the snapshot is built.
func (s *Snapshot) ReadsRoles() bool { return s != nil && s.readsRoles }

// Build compiles the policies that run at admission into a Snapshot, as
// a fresh Builder does (see Builder.Build). The error is always nil; it is
// kept for callers that compiled through Build before it could not fail.
func Build(policies []kyvernov1.PolicyInterface, exceptions []*kyvernov2.PolicyException) (*Snapshot, error) {
	s, _ := NewBuilder().Build(policies, exceptions)
	return s, nil
}

// Empty is the snapshot before any policy is known: it allows everything.
func Empty() *Snapshot {
	s, err := Build(nil, nil)
	if err != nil {
		panic("policycache: compiling no policies failed: " + err.Error())
	}
	return s
}

// FineGrainedSet is the set of one policy with webhook matchConditions.
type FineGrainedSet struct {
	Set *engine.PolicySet
	// FailClosed is true when the policy's failurePolicy is Fail.
	FailClosed bool
}

// NamespaceSets are the sets of one namespace's namespaced policies, by
// failure policy; both are set, empty when no policy asks for it.
type NamespaceSets struct {
	Fail, Ignore *engine.PolicySet
}

// Sets returns every set of the snapshot: Fail, the namespaces' Fail by
// namespace, Ignore, the namespaces' Ignore, then the fine-grained ones by
// key.
func (s *Snapshot) Sets() []*engine.PolicySet {
	out := make([]*engine.PolicySet, 0, 2+2*len(s.Namespaced)+len(s.FineGrained))
	namespaces := slices.Sorted(maps.Keys(s.Namespaced))
	out = append(out, s.Fail)
	for _, ns := range namespaces {
		out = append(out, s.Namespaced[ns].Fail)
	}
	out = append(out, s.Ignore)
	for _, ns := range namespaces {
		out = append(out, s.Namespaced[ns].Ignore)
	}
	for _, k := range slices.Sorted(maps.Keys(s.FineGrained)) {
		out = append(out, s.FineGrained[k].Set)
	}
	return out
}

// Policies returns every compiled policy of the snapshot.
func (s *Snapshot) Policies() []*engine.Policy {
	var out []*engine.Policy
	for _, set := range s.Sets() {
		out = append(out, set.Policies()...)
	}
	return out
}

func sortedPolicies(in []kyvernov1.PolicyInterface) []kyvernov1.PolicyInterface {
	out := append([]kyvernov1.PolicyInterface(nil), in...)
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.IsNamespaced() != b.IsNamespaced() {
			return !a.IsNamespaced()
		}
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		if a.GetName() != b.GetName() {
			return a.GetName() < b.GetName()
		}
		// Policies of different kinds may share a name and so a key
		// (not an ID; the set serves both): the kyverno.io kind first,
		// then by kind, so the set's order never depends on informer
		// order.
		if ra, rb := kindRank(a), kindRank(b); ra != rb {
			return ra < rb
		}
		return a.GetKind() < b.GetKind()
	})
	return out
}

// kindRank orders kyverno.io's ClusterPolicy and Policy before the
// policies.kyverno.io kinds.
func kindRank(p kyvernov1.PolicyInterface) int {
	switch p.GetKind() {
	case kyvernov1.ClusterPolicyKind, kyvernov1.PolicyKind:
		return 0
	}
	return 1
}
