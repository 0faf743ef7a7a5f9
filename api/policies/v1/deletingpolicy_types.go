package v1

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// Kinds of the deleting policies.
const (
	DeletingPolicyKind           = "DeletingPolicy"
	NamespacedDeletingPolicyKind = "NamespacedDeletingPolicy"
)

// DeletingPolicy deletes, on a cron schedule, the resources its
// matchConstraints select and whose CEL conditions all hold: the
// successor of ClusterCleanupPolicy.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=deletingpolicies,scope=Cluster,shortName=dpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="SCHEDULE",type=string,JSONPath=".spec.schedule"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.conditionStatus.message`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type DeletingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares what the policy deletes and when.
	Spec DeletingPolicySpec `json:"spec"`

	// Status is what charter observed about the policy, in Kyverno's
	// shape: conditionStatus and lastExecutionTime.
	// +optional
	Status DeletingPolicyStatus `json:"status,omitzero"`
}

// DeletingPolicyList is a list of DeletingPolicy.
//
// +kubebuilder:object:root=true
type DeletingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DeletingPolicy `json:"items"`
}

// NamespacedDeletingPolicy is a DeletingPolicy that deletes only in its
// own namespace: the successor of CleanupPolicy.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=namespaceddeletingpolicies,scope=Namespaced,shortName=ndpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="SCHEDULE",type=string,JSONPath=".spec.schedule"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.conditionStatus.message`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type NamespacedDeletingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares what the policy deletes and when.
	Spec DeletingPolicySpec `json:"spec"`

	// Status is what charter observed about the policy, in Kyverno's
	// shape: conditionStatus and lastExecutionTime.
	// +optional
	Status DeletingPolicyStatus `json:"status,omitzero"`
}

// NamespacedDeletingPolicyList is a list of NamespacedDeletingPolicy.
//
// +kubebuilder:object:root=true
type NamespacedDeletingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespacedDeletingPolicy `json:"items"`
}

// DeletingPolicySpec is what a DeletingPolicy deletes and when.
type DeletingPolicySpec struct {
	// MatchConstraints name the resources to list (resourceRules, with
	// objectSelector as the list's label selector) and filter them; at
	// least one resource rule is required. Operations are ignored.
	// +optional
	MatchConstraints *admissionregistrationv1.MatchResources `json:"matchConstraints,omitempty"`

	// Conditions are CEL expressions over object (and namespaceObject,
	// variables) that must all be true for a resource to be deleted.
	// +listType=map
	// +listMapKey=name
	// +optional
	Conditions []admissionregistrationv1.MatchCondition `json:"conditions,omitempty"`

	// Variables are named CEL expressions, available as variables.<name>
	// in the conditions.
	// +listType=map
	// +listMapKey=name
	// +optional
	Variables []admissionregistrationv1.Variable `json:"variables,omitempty"`

	// Schedule is a cron schedule, e.g. "*/5 * * * *" (UTC).
	Schedule string `json:"schedule"`

	// DeletionPropagationPolicy is the propagation policy of the deletes:
	// Orphan, Background or Foreground.
	// +optional
	// +kubebuilder:validation:Enum=Orphan;Background;Foreground
	DeletionPropagationPolicy *metav1.DeletionPropagation `json:"deletionPropagationPolicy,omitempty"`
}

// DeletingPolicyLike is what DeletingPolicy and NamespacedDeletingPolicy
// have in common. Both are also kyvernov2.CleanupPolicyInterface, so the
// cleanup controller schedules them as it schedules CleanupPolicies;
// their GetSpec is a view (schedule and propagation policy only).
//
// +kubebuilder:object:generate=false
type DeletingPolicyLike interface {
	kyvernov2.CleanupPolicyInterface
	// GetDeletingPolicySpec returns the spec (not a copy).
	GetDeletingPolicySpec() *DeletingPolicySpec
	// GetStatus returns the status (not a copy).
	GetStatus() *DeletingPolicyStatus
}

var (
	_ DeletingPolicyLike = (*DeletingPolicy)(nil)
	_ DeletingPolicyLike = (*NamespacedDeletingPolicy)(nil)
)

// CleanupSpec is a DeletingPolicy's schedule and propagation policy in
// CleanupPolicy terms; match and conditions stay in the
// DeletingPolicySpec, which the engine compiles. It is built on each call.
func (s *DeletingPolicySpec) CleanupSpec() *kyvernov2.CleanupPolicySpec {
	return &kyvernov2.CleanupPolicySpec{Schedule: s.Schedule, DeletionPropagationPolicy: s.DeletionPropagationPolicy}
}

// GetDeletingPolicySpec returns the spec.
func (p *DeletingPolicy) GetDeletingPolicySpec() *DeletingPolicySpec { return &p.Spec }

// GetSpec returns the schedule and propagation policy (see CleanupSpec).
func (p *DeletingPolicy) GetSpec() *kyvernov2.CleanupPolicySpec { return p.Spec.CleanupSpec() }

// GetStatus returns the policy's status.
func (p *DeletingPolicy) GetStatus() *DeletingPolicyStatus { return &p.Status }

// GetKind returns "DeletingPolicy".
func (p *DeletingPolicy) GetKind() string { return DeletingPolicyKind }

// IsNamespaced is false.
func (p *DeletingPolicy) IsNamespaced() bool { return false }

// GetDeletingPolicySpec returns the spec.
func (p *NamespacedDeletingPolicy) GetDeletingPolicySpec() *DeletingPolicySpec { return &p.Spec }

// GetSpec returns the schedule and propagation policy (see CleanupSpec).
func (p *NamespacedDeletingPolicy) GetSpec() *kyvernov2.CleanupPolicySpec {
	return p.Spec.CleanupSpec()
}

// GetStatus returns the policy's status.
func (p *NamespacedDeletingPolicy) GetStatus() *DeletingPolicyStatus { return &p.Status }

// GetKind returns "NamespacedDeletingPolicy".
func (p *NamespacedDeletingPolicy) GetKind() string { return NamespacedDeletingPolicyKind }

// IsNamespaced is true: the policy deletes in its own namespace only.
func (p *NamespacedDeletingPolicy) IsNamespaced() bool { return true }
