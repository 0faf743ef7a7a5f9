package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// ValidatingPolicy is the policies.kyverno.io/v1beta1 form of the policies.kyverno.io/v1
// ValidatingPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
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

// NamespacedValidatingPolicy is the policies.kyverno.io/v1beta1 form of the policies.kyverno.io/v1
// NamespacedValidatingPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=namespacedvalidatingpolicies,scope=Namespaced,shortName=nvpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type NamespacedValidatingPolicy struct {
	policiesv1.NamespacedValidatingPolicy `json:",inline"`
}

// NamespacedValidatingPolicyList is a list of NamespacedValidatingPolicy.
//
// +kubebuilder:object:root=true
type NamespacedValidatingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespacedValidatingPolicy `json:"items"`
}

// Hub returns a copy of the object as the policies.kyverno.io/v1 NamespacedValidatingPolicy.
func (p *NamespacedValidatingPolicy) Hub() runtime.Object {
	h := p.NamespacedValidatingPolicy.DeepCopy()
	h.SetGroupVersionKind(policiesv1.GroupVersion.WithKind("NamespacedValidatingPolicy"))
	return h
}

// MutatingPolicy is the policies.kyverno.io/v1beta1 form of the policies.kyverno.io/v1
// MutatingPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
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

// NamespacedMutatingPolicy is the policies.kyverno.io/v1beta1 form of the policies.kyverno.io/v1
// NamespacedMutatingPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=namespacedmutatingpolicies,scope=Namespaced,shortName=nmpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="ADMISSION",type=boolean,JSONPath=".status.admission"
// +kubebuilder:printcolumn:name="BACKGROUND",type=boolean,JSONPath=".status.background"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.conditionStatus.message`
type NamespacedMutatingPolicy struct {
	policiesv1.NamespacedMutatingPolicy `json:",inline"`
}

// NamespacedMutatingPolicyList is a list of NamespacedMutatingPolicy.
//
// +kubebuilder:object:root=true
type NamespacedMutatingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespacedMutatingPolicy `json:"items"`
}

// Hub returns a copy of the object as the policies.kyverno.io/v1 NamespacedMutatingPolicy.
func (p *NamespacedMutatingPolicy) Hub() runtime.Object {
	h := p.NamespacedMutatingPolicy.DeepCopy()
	h.SetGroupVersionKind(policiesv1.GroupVersion.WithKind("NamespacedMutatingPolicy"))
	return h
}

// GeneratingPolicy is the policies.kyverno.io/v1beta1 form of the policies.kyverno.io/v1
// GeneratingPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
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

// NamespacedGeneratingPolicy is the policies.kyverno.io/v1beta1 form of the policies.kyverno.io/v1
// NamespacedGeneratingPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=namespacedgeneratingpolicies,scope=Namespaced,shortName=ngpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type NamespacedGeneratingPolicy struct {
	policiesv1.NamespacedGeneratingPolicy `json:",inline"`
}

// NamespacedGeneratingPolicyList is a list of NamespacedGeneratingPolicy.
//
// +kubebuilder:object:root=true
type NamespacedGeneratingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespacedGeneratingPolicy `json:"items"`
}

// Hub returns a copy of the object as the policies.kyverno.io/v1 NamespacedGeneratingPolicy.
func (p *NamespacedGeneratingPolicy) Hub() runtime.Object {
	h := p.NamespacedGeneratingPolicy.DeepCopy()
	h.SetGroupVersionKind(policiesv1.GroupVersion.WithKind("NamespacedGeneratingPolicy"))
	return h
}

// DeletingPolicy is the policies.kyverno.io/v1beta1 form of the policies.kyverno.io/v1
// DeletingPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
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

// NamespacedDeletingPolicy is the policies.kyverno.io/v1beta1 form of the policies.kyverno.io/v1
// NamespacedDeletingPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=namespaceddeletingpolicies,scope=Namespaced,shortName=ndpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="SCHEDULE",type=string,JSONPath=".spec.schedule"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.conditionStatus.message`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type NamespacedDeletingPolicy struct {
	policiesv1.NamespacedDeletingPolicy `json:",inline"`
}

// NamespacedDeletingPolicyList is a list of NamespacedDeletingPolicy.
//
// +kubebuilder:object:root=true
type NamespacedDeletingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespacedDeletingPolicy `json:"items"`
}

// Hub returns a copy of the object as the policies.kyverno.io/v1 NamespacedDeletingPolicy.
func (p *NamespacedDeletingPolicy) Hub() runtime.Object {
	h := p.NamespacedDeletingPolicy.DeepCopy()
	h.SetGroupVersionKind(policiesv1.GroupVersion.WithKind("NamespacedDeletingPolicy"))
	return h
}

// ImageValidatingPolicy is the policies.kyverno.io/v1beta1 form of the policies.kyverno.io/v1
// ImageValidatingPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
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

// NamespacedImageValidatingPolicy is the policies.kyverno.io/v1beta1 form of the policies.kyverno.io/v1
// NamespacedImageValidatingPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=namespacedimagevalidatingpolicies,scope=Namespaced,shortName=nivpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type NamespacedImageValidatingPolicy struct {
	policiesv1.NamespacedImageValidatingPolicy `json:",inline"`
}

// NamespacedImageValidatingPolicyList is a list of NamespacedImageValidatingPolicy.
//
// +kubebuilder:object:root=true
type NamespacedImageValidatingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespacedImageValidatingPolicy `json:"items"`
}

// Hub returns a copy of the object as the policies.kyverno.io/v1 NamespacedImageValidatingPolicy.
func (p *NamespacedImageValidatingPolicy) Hub() runtime.Object {
	h := p.NamespacedImageValidatingPolicy.DeepCopy()
	h.SetGroupVersionKind(policiesv1.GroupVersion.WithKind("NamespacedImageValidatingPolicy"))
	return h
}

// PolicyException is the policies.kyverno.io/v1beta1 form of the policies.kyverno.io/v1
// PolicyException: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
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
