package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyKind is the kind of Policy.
const PolicyKind = "Policy"

// Policy is a set of rules that applies to resources in its own namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=policies,scope=Namespaced,shortName=pol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="ADMISSION",type=boolean,JSONPath=".status.admission"
// +kubebuilder:printcolumn:name="BACKGROUND",type=boolean,JSONPath=".status.background"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
type Policy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares the policy's rules and behaviour.
	Spec Spec `json:"spec,omitzero"`

	// Status is what charter observed about the policy.
	// +optional
	Status PolicyStatus `json:"status,omitzero"`
}

// GetSpec returns the policy's spec.
func (p *Policy) GetSpec() *Spec { return &p.Spec }

// GetStatus returns the policy's status.
func (p *Policy) GetStatus() *PolicyStatus { return &p.Status }

// IsNamespaced is true: a Policy applies in its namespace only.
func (p *Policy) IsNamespaced() bool { return true }

// GetKind returns "Policy".
func (p *Policy) GetKind() string { return PolicyKind }

// IsReady reports whether the Ready condition is True.
func (p *Policy) IsReady() bool { return p.Status.IsReady() }

// CreateDeepCopy returns a deep copy as a PolicyInterface.
func (p *Policy) CreateDeepCopy() PolicyInterface { return p.DeepCopy() }

// PolicyList is a list of Policy.
//
// +kubebuilder:object:root=true
type PolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Policy `json:"items"`
}
