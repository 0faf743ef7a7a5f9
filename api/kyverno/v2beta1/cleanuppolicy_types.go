package v2beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// CleanupPolicy is the kyverno.io/v2beta1 form of the kyverno.io/v2
// CleanupPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=cleanuppolicies,scope=Namespaced,shortName=cleanpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="SCHEDULE",type=string,JSONPath=".spec.schedule"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type CleanupPolicy struct {
	kyvernov2.CleanupPolicy `json:",inline"`
}

// CleanupPolicyList is a list of CleanupPolicy.
//
// +kubebuilder:object:root=true
type CleanupPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CleanupPolicy `json:"items"`
}

// Hub returns a copy of the object as the kyverno.io/v2 CleanupPolicy.
func (p *CleanupPolicy) Hub() runtime.Object {
	h := p.CleanupPolicy.DeepCopy()
	h.SetGroupVersionKind(kyvernov2.GroupVersion.WithKind("CleanupPolicy"))
	return h
}

// ClusterCleanupPolicy is the kyverno.io/v2beta1 form of the kyverno.io/v2
// ClusterCleanupPolicy: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=clustercleanuppolicies,scope=Cluster,shortName=ccleanpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="SCHEDULE",type=string,JSONPath=".spec.schedule"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type ClusterCleanupPolicy struct {
	kyvernov2.ClusterCleanupPolicy `json:",inline"`
}

// ClusterCleanupPolicyList is a list of ClusterCleanupPolicy.
//
// +kubebuilder:object:root=true
type ClusterCleanupPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterCleanupPolicy `json:"items"`
}

// Hub returns a copy of the object as the kyverno.io/v2 ClusterCleanupPolicy.
func (p *ClusterCleanupPolicy) Hub() runtime.Object {
	h := p.ClusterCleanupPolicy.DeepCopy()
	h.SetGroupVersionKind(kyvernov2.GroupVersion.WithKind("ClusterCleanupPolicy"))
	return h
}
