package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// UpdateRequest is the kyverno.io/v1beta1 form of the kyverno.io/v2
// UpdateRequest: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=updaterequests,scope=Namespaced,shortName=ur,categories=kyverno;charter
// +kubebuilder:printcolumn:name="POLICY",type=string,JSONPath=".spec.policy"
// +kubebuilder:printcolumn:name="RULETYPE",type=string,JSONPath=".spec.requestType"
// +kubebuilder:printcolumn:name="RESOURCEKIND",type=string,JSONPath=".spec.resource.kind"
// +kubebuilder:printcolumn:name="RESOURCENAME",type=string,JSONPath=".spec.resource.name"
// +kubebuilder:printcolumn:name="RESOURCENAMESPACE",type=string,JSONPath=".spec.resource.namespace",priority=1
// +kubebuilder:printcolumn:name="STATE",type=string,JSONPath=".status.state"
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=".status.message"
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type UpdateRequest struct {
	kyvernov2.UpdateRequest `json:",inline"`
}

// UpdateRequestList is a list of UpdateRequest.
//
// +kubebuilder:object:root=true
type UpdateRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UpdateRequest `json:"items"`
}

// Hub returns a copy of the object as the kyverno.io/v2 UpdateRequest.
func (p *UpdateRequest) Hub() runtime.Object {
	h := p.UpdateRequest.DeepCopy()
	h.SetGroupVersionKind(kyvernov2.GroupVersion.WithKind("UpdateRequest"))
	return h
}
