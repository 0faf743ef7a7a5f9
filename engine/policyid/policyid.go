// Package policyid names policies: the Key users read (reports, metrics,
// events, the CLI), the ID that tells policies of different kinds and one
// key apart (the engine's PolicySet, the policy cache and every map of
// policies key by it), the namespace a policy acts in and the key of its
// own webhook. It is a leaf of engine/: the engine root and the rooms
// that name policies import it.
package policyid

import (
	"strings"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// Of returns the ID of p, which identifies a policy among every kind a
// PolicySet serves.
//
// Key is what users read (report results' policy, metrics'
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
// holds twice; the CLI reads files and can (the engine refuses the
// second as a duplicate policy).
func Of(p kyvernov1.PolicyInterface) string {
	return For(p.GetKind(), Key(p))
}

// For is the ID of the policy of that kind and Key,
// e.g. of a fault.Fault's Kind and Name.
func For(kind, key string) string {
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

// Parse splits an ID into the policy's kind and key. The kind of
// a bare key (a ClusterPolicy's or Policy's) is "": the key tells which of
// the two it is.
func Parse(id string) (kind, key string) {
	if kind, key, ok := strings.Cut(id, ":"); ok {
		return kind, key
	}
	return "", id
}

// Key names a policy the way reports, metrics, events and the CLI
// name it, as Kyverno does: "<name>" for a cluster-wide policy,
// "<namespace>/<name>" for a namespaced one, whatever its kind. Policies
// of different kinds may share a key; Of tells them apart.
func Key(p kyvernov1.PolicyInterface) string {
	if p.IsNamespaced() {
		return Namespace(p) + "/" + p.GetName()
	}
	return p.GetName()
}

// Namespace is the namespace a policy acts in: its own for a
// namespaced policy ("default" when it names none, as Kyverno reads it),
// "" for a cluster-wide policy.
func Namespace(src kyvernov1.PolicyInterface) string {
	if !src.IsNamespaced() {
		return ""
	}
	if ns := src.GetNamespace(); ns != "" {
		return ns
	}
	return "default"
}

// FineGrainedKey names a policy's own webhook (its path ends in it): the
// Key of a ClusterPolicy or Policy, as Kyverno's; for the other kinds
// "<kind>.policies.kyverno.io/<Key>", lower case. Each segment
// is a DNS subdomain, as the API server wants of a Service path, and no
// two policies share one: a namespace name holds no dot, so the kind's
// segment is never a Policy's namespace, and a ValidatingPolicy and a
// ClusterPolicy of one name differ.
func FineGrainedKey(p kyvernov1.PolicyInterface) string {
	if isKyvernoKind(p.GetKind()) {
		return Key(p)
	}
	return strings.ToLower(p.GetKind()) + "." + policiesv1.GroupVersion.Group + "/" + Key(p)
}
