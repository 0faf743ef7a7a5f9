package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// ValidatingPolicy is the policies.kyverno.io/v1alpha1 form of the policies.kyverno.io/v1
// ValidatingPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=validatingpolicies,scope=Cluster,shortName=vpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type ValidatingPolicy struct {
	policiesv1.ValidatingPolicy `json:",inline"`
}

// ValidatingPolicyList is a list of ValidatingPolicy.
//
// +kubebuilder:object:root=true
type ValidatingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ValidatingPolicy `json:"items"`
}

// Hub returns a copy of the object as the policies.kyverno.io/v1 ValidatingPolicy.
func (p *ValidatingPolicy) Hub() runtime.Object {
	h := p.ValidatingPolicy.DeepCopy()
	h.SetGroupVersionKind(policiesv1.GroupVersion.WithKind("ValidatingPolicy"))
	return h
}

// MutatingPolicy is the policies.kyverno.io/v1alpha1 form of the policies.kyverno.io/v1
// MutatingPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=mutatingpolicies,scope=Cluster,shortName=mpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="ADMISSION",type=boolean,JSONPath=".status.admission"
// +kubebuilder:printcolumn:name="BACKGROUND",type=boolean,JSONPath=".status.background"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.conditionStatus.message`
type MutatingPolicy struct {
	policiesv1.MutatingPolicy `json:",inline"`
}

// MutatingPolicyList is a list of MutatingPolicy.
//
// +kubebuilder:object:root=true
type MutatingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MutatingPolicy `json:"items"`
}

// Hub returns a copy of the object as the policies.kyverno.io/v1 MutatingPolicy.
func (p *MutatingPolicy) Hub() runtime.Object {
	h := p.MutatingPolicy.DeepCopy()
	h.SetGroupVersionKind(policiesv1.GroupVersion.WithKind("MutatingPolicy"))
	return h
}

// GeneratingPolicy is the policies.kyverno.io/v1alpha1 form of the policies.kyverno.io/v1
// GeneratingPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=generatingpolicies,scope=Cluster,shortName=gpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type GeneratingPolicy struct {
	policiesv1.GeneratingPolicy `json:",inline"`
}

// GeneratingPolicyList is a list of GeneratingPolicy.
//
// +kubebuilder:object:root=true
type GeneratingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GeneratingPolicy `json:"items"`
}

// Hub returns a copy of the object as the policies.kyverno.io/v1 GeneratingPolicy.
func (p *GeneratingPolicy) Hub() runtime.Object {
	h := p.GeneratingPolicy.DeepCopy()
	h.SetGroupVersionKind(policiesv1.GroupVersion.WithKind("GeneratingPolicy"))
	return h
}

// DeletingPolicy is the policies.kyverno.io/v1alpha1 form of the policies.kyverno.io/v1
// DeletingPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=deletingpolicies,scope=Cluster,shortName=dpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="SCHEDULE",type=string,JSONPath=".spec.schedule"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.conditionStatus.message`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type DeletingPolicy struct {
	policiesv1.DeletingPolicy `json:",inline"`
}

// DeletingPolicyList is a list of DeletingPolicy.
//
// +kubebuilder:object:root=true
type DeletingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DeletingPolicy `json:"items"`
}

// Hub returns a copy of the object as the policies.kyverno.io/v1 DeletingPolicy.
func (p *DeletingPolicy) Hub() runtime.Object {
	h := p.DeletingPolicy.DeepCopy()
	h.SetGroupVersionKind(policiesv1.GroupVersion.WithKind("DeletingPolicy"))
	return h
}

// ImageValidatingPolicy is the policies.kyverno.io/v1alpha1 form of the policies.kyverno.io/v1
// ImageValidatingPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=imagevalidatingpolicies,scope=Cluster,shortName=ivpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type ImageValidatingPolicy struct {
	policiesv1.ImageValidatingPolicy `json:",inline"`
}

// ImageValidatingPolicyList is a list of ImageValidatingPolicy.
//
// +kubebuilder:object:root=true
type ImageValidatingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ImageValidatingPolicy `json:"items"`
}

// Hub returns a copy of the object as the policies.kyverno.io/v1 ImageValidatingPolicy.
func (p *ImageValidatingPolicy) Hub() runtime.Object {
	h := p.ImageValidatingPolicy.DeepCopy()
	h.SetGroupVersionKind(policiesv1.GroupVersion.WithKind("ImageValidatingPolicy"))
	return h
}

// PolicyException is the policies.kyverno.io/v1alpha1 form of the policies.kyverno.io/v1
// PolicyException: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion
// +kubebuilder:resource:path=policyexceptions,scope=Namespaced,shortName=celpolex,categories=kyverno;charter
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type PolicyException struct {
	policiesv1.PolicyException `json:",inline"`
}

// PolicyExceptionList is a list of PolicyException.
//
// +kubebuilder:object:root=true
type PolicyExceptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyException `json:"items"`
}

// Hub returns a copy of the object as the policies.kyverno.io/v1 PolicyException.
func (p *PolicyException) Hub() runtime.Object {
	h := p.PolicyException.DeepCopy()
	h.SetGroupVersionKind(policiesv1.GroupVersion.WithKind("PolicyException"))
	return h
}
