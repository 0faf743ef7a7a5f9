package engine

import (
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// PolicyID identifies a policy among every kind a PolicySet serves.
//
// PolicyKey is what users read (report results' policy, metrics'
// policy_name, events, CLI output), and it is the same for a ClusterPolicy
// and a ValidatingPolicy of one name, or a Policy and a
// NamespacedValidatingPolicy of one namespace and name: the natural state
// of a user moving policies to the CEL kinds one at a time, and Kyverno
// serves both. The ID tells them apart; maps of policies key by it.
//
// kyverno.io's ClusterPolicy and Policy keep their key as their ID, since
// Kyverno's own objects name them by it (UpdateRequest spec.policy,
// PolicyException policyName); every other kind's ID is "<Kind>:<key>"
// (no name or namespace holds a colon). Two objects of one kind share an
// ID only when they are the same object, which the API server never
// holds twice; the CLI reads files and can (see faultDuplicatePolicy).
func PolicyID(p kyvernov1.PolicyInterface) string {
	return PolicyIDFor(p.GetKind(), PolicyKey(p))
}

// PolicyIDFor is the PolicyID of the policy of that kind and PolicyKey,
// e.g. of a fault.Fault's Kind and Name.
func PolicyIDFor(kind, key string) string {
	if isKyvernoKind(kind) {
		return key
	}
	return kind + ":" + key
}

// isKyvernoKind reports whether kind is kyverno.io's ClusterPolicy or
// Policy, whose ID is their key.
func isKyvernoKind(kind string) bool {
	return kind == kyvernov1.ClusterPolicyKind || kind == kyvernov1.PolicyKind || kind == ""
}

// ParsePolicyID splits an ID into the policy's kind and key. The kind of
// a bare key (a ClusterPolicy's or Policy's) is "": the key tells which of
// the two it is.
func ParsePolicyID(id string) (kind, key string) {
	if kind, key, ok := strings.Cut(id, ":"); ok {
		return kind, key
	}
	return "", id
}

// ID returns the policy's PolicyID.
func (p *Policy) ID() string { return p.id }

// ID returns the PolicyID of the response's policy: the responses of a
// ClusterPolicy and a ValidatingPolicy of one name share a Key, not an ID.
func (r *PolicyResponse) ID() string {
	if r.Policy == nil {
		return r.Key
	}
	return PolicyIDFor(r.Policy.GetKind(), r.Key)
}

// isOf reports whether the response is the policy's, without building an
// ID.
func (r *PolicyResponse) isOf(p *Policy) bool {
	return r.Key == p.key && r.Policy != nil && r.Policy.GetKind() == p.source.GetKind()
}
