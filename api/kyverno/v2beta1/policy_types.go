package v2beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// ClusterPolicy is the kyverno.io/v2beta1 form of the kyverno.io/v1
// ClusterPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=clusterpolicies,scope=Cluster,shortName=cpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="ADMISSION",type=boolean,JSONPath=".status.admission"
// +kubebuilder:printcolumn:name="BACKGROUND",type=boolean,JSONPath=".status.background"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
type ClusterPolicy struct {
	kyvernov1.ClusterPolicy `json:",inline"`
}

// ClusterPolicyList is a list of ClusterPolicy.
//
// +kubebuilder:object:root=true
type ClusterPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterPolicy `json:"items"`
}

// Hub returns a copy of the object as the kyverno.io/v1 ClusterPolicy.
func (p *ClusterPolicy) Hub() runtime.Object {
	h := p.ClusterPolicy.DeepCopy()
	h.SetGroupVersionKind(kyvernov1.GroupVersion.WithKind("ClusterPolicy"))
	return h
}

// Policy is the kyverno.io/v2beta1 form of the kyverno.io/v1
// Policy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=policies,scope=Namespaced,shortName=pol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="ADMISSION",type=boolean,JSONPath=".status.admission"
// +kubebuilder:printcolumn:name="BACKGROUND",type=boolean,JSONPath=".status.background"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
type Policy struct {
	kyvernov1.Policy `json:",inline"`
}

// PolicyList is a list of Policy.
//
// +kubebuilder:object:root=true
type PolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Policy `json:"items"`
}

// Hub returns a copy of the object as the kyverno.io/v1 Policy.
func (p *Policy) Hub() runtime.Object {
	h := p.Policy.DeepCopy()
	h.SetGroupVersionKind(kyvernov1.GroupVersion.WithKind("Policy"))
	return h
}
