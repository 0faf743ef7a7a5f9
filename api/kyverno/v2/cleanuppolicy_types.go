package v2

import (
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kinds of the cleanup policies.
const (
	CleanupPolicyKind        = "CleanupPolicy"
	ClusterCleanupPolicyKind = "ClusterCleanupPolicy"
)

// Condition types of a cleanup policy's status.
const (
	// CleanupConditionReady is True when the policy is valid and scheduled.
	CleanupConditionReady = "Ready"
)

// CleanupPolicySpec declares which resources are deleted and when.
type CleanupPolicySpec struct {
	// Context adds variables the conditions can use.
	// +optional
	Context []kyvernov1.ContextEntry `json:"context,omitempty"`

	// MatchResources selects the resources to delete.
	MatchResources MatchResources `json:"match"`

	// ExcludeResources selects resources to keep.
	// +optional
	ExcludeResources *MatchResources `json:"exclude,omitempty"`

	// Schedule is a cron schedule, e.g. "*/5 * * * *".
	Schedule string `json:"schedule"`

	// Conditions must pass for a matching resource to be deleted.
	// +optional
	Conditions *kyvernov1.AnyAllConditions `json:"conditions,omitempty"`

	// DeletionPropagationPolicy is the propagation policy of the deletes:
	// Orphan, Background or Foreground.
	// +optional
	// +kubebuilder:validation:Enum=Orphan;Background;Foreground
	DeletionPropagationPolicy *metav1.DeletionPropagation `json:"deletionPropagationPolicy,omitempty"`
}

// CleanupPolicyStatus is what charter observed about a cleanup policy.
type CleanupPolicyStatus struct {
	// Conditions are the policy's conditions, e.g. Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastExecutionTime is when the policy last ran.
	// +optional
	LastExecutionTime *metav1.Time `json:"lastExecutionTime,omitempty"`
}

// CleanupPolicyInterface is what CleanupPolicy and ClusterCleanupPolicy have
// in common. The status is not part of it: DeletingPolicies are
// CleanupPolicyInterface too and keep theirs in Kyverno's
// policies.kyverno.io shape (CleanupStatusHolder is the other one).
//
// +kubebuilder:object:generate=false
type CleanupPolicyInterface interface {
	metav1.Object
	GetSpec() *CleanupPolicySpec
	GetKind() string
	IsNamespaced() bool
}

// CleanupStatusHolder is a cleanup policy with the kyverno.io status:
// Ready among plain conditions, and lastExecutionTime.
//
// +kubebuilder:object:generate=false
type CleanupStatusHolder interface {
	CleanupPolicyInterface
	GetStatus() *CleanupPolicyStatus
}

var (
	_ CleanupStatusHolder = (*CleanupPolicy)(nil)
	_ CleanupStatusHolder = (*ClusterCleanupPolicy)(nil)
)

// CleanupPolicy deletes matching resources in its namespace on a schedule.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=cleanuppolicies,scope=Namespaced,shortName=cleanpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="SCHEDULE",type=string,JSONPath=".spec.schedule"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type CleanupPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares which resources are deleted and when.
	Spec CleanupPolicySpec `json:"spec"`

	// Status is what charter observed.
	// +optional
	Status CleanupPolicyStatus `json:"status,omitzero"`
}

// GetSpec returns the policy's spec.
func (p *CleanupPolicy) GetSpec() *CleanupPolicySpec { return &p.Spec }

// GetStatus returns the policy's status.
func (p *CleanupPolicy) GetStatus() *CleanupPolicyStatus { return &p.Status }

// GetKind returns "CleanupPolicy".
func (p *CleanupPolicy) GetKind() string { return CleanupPolicyKind }

// IsNamespaced is true.
func (p *CleanupPolicy) IsNamespaced() bool { return true }

// CleanupPolicyList is a list of CleanupPolicy.
//
// +kubebuilder:object:root=true
type CleanupPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CleanupPolicy `json:"items"`
}

// ClusterCleanupPolicy deletes matching resources cluster-wide on a schedule.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=clustercleanuppolicies,scope=Cluster,shortName=ccleanpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="SCHEDULE",type=string,JSONPath=".spec.schedule"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type ClusterCleanupPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares which resources are deleted and when.
	Spec CleanupPolicySpec `json:"spec"`

	// Status is what charter observed.
	// +optional
	Status CleanupPolicyStatus `json:"status,omitzero"`
}

// GetSpec returns the policy's spec.
func (p *ClusterCleanupPolicy) GetSpec() *CleanupPolicySpec { return &p.Spec }

// GetStatus returns the policy's status.
func (p *ClusterCleanupPolicy) GetStatus() *CleanupPolicyStatus { return &p.Status }

// GetKind returns "ClusterCleanupPolicy".
func (p *ClusterCleanupPolicy) GetKind() string { return ClusterCleanupPolicyKind }

// IsNamespaced is false.
func (p *ClusterCleanupPolicy) IsNamespaced() bool { return false }

// ClusterCleanupPolicyList is a list of ClusterCleanupPolicy.
//
// +kubebuilder:object:root=true
type ClusterCleanupPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterCleanupPolicy `json:"items"`
}
