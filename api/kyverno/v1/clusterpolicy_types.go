package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterPolicyKind is the kind of ClusterPolicy.
const ClusterPolicyKind = "ClusterPolicy"

// ClusterPolicy is a set of rules that applies to resources in every
// namespace and to cluster-scoped resources.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=clusterpolicies,scope=Cluster,shortName=cpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="ADMISSION",type=boolean,JSONPath=".status.admission"
// +kubebuilder:printcolumn:name="BACKGROUND",type=boolean,JSONPath=".status.background"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
type ClusterPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares the policy's rules and behaviour.
	Spec Spec `json:"spec,omitzero"`

	// Status is what charter observed about the policy.
	// +optional
	Status PolicyStatus `json:"status,omitzero"`
}

// GetSpec returns the policy's spec.
func (p *ClusterPolicy) GetSpec() *Spec { return &p.Spec }

// GetStatus returns the policy's status.
func (p *ClusterPolicy) GetStatus() *PolicyStatus { return &p.Status }

// IsNamespaced is false: a ClusterPolicy is cluster-wide.
func (p *ClusterPolicy) IsNamespaced() bool { return false }

// GetKind returns "ClusterPolicy".
func (p *ClusterPolicy) GetKind() string { return ClusterPolicyKind }

// IsReady reports whether the Ready condition is True.
func (p *ClusterPolicy) IsReady() bool { return p.Status.IsReady() }

// CreateDeepCopy returns a deep copy as a PolicyInterface.
func (p *ClusterPolicy) CreateDeepCopy() PolicyInterface { return p.DeepCopy() }

// ClusterPolicyList is a list of ClusterPolicy.
//
// +kubebuilder:object:root=true
type ClusterPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterPolicy `json:"items"`
}
