package v1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +kubebuilder:object:generate=false

// PolicyInterface is what ClusterPolicy and Policy have in common, so the
// engine and controllers handle both alike.
type PolicyInterface interface {
	metav1.Object
	runtime.Object

	// GetSpec returns the policy's spec (not a copy).
	GetSpec() *Spec
	// IsNamespaced is true for Policy, false for ClusterPolicy.
	IsNamespaced() bool
	// GetKind returns "ClusterPolicy" or "Policy".
	GetKind() string
	// IsReady reports whether the status says the policy is in force.
	IsReady() bool
	// CreateDeepCopy returns a deep copy as a PolicyInterface.
	CreateDeepCopy() PolicyInterface
}

// StatusHolder is a ClusterPolicy or Policy: a policy with this package's
// PolicyStatus (the policies.kyverno.io kinds have Kyverno's
// status.conditionStatus shape instead).
//
// +kubebuilder:object:generate=false
type StatusHolder interface {
	PolicyInterface
	// GetStatus returns the policy's status (not a copy).
	GetStatus() *PolicyStatus
}

var (
	_ StatusHolder = (*ClusterPolicy)(nil)
	_ StatusHolder = (*Policy)(nil)
)

// PolicyForKey returns an empty ClusterPolicy ("name") or Policy
// ("namespace/name") named by a policy key, with its apiVersion and kind
// set, e.g. to record an event on it.
func PolicyForKey(key string) PolicyInterface {
	if ns, name, ok := strings.Cut(key, "/"); ok {
		return &Policy{TypeMeta: metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: PolicyKind},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	return &ClusterPolicy{TypeMeta: metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: ClusterPolicyKind},
		ObjectMeta: metav1.ObjectMeta{Name: key}}
}
