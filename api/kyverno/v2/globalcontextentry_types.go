package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	kyvernov2alpha1 "github.com/charter-dev/charter/api/kyverno/v2alpha1"
)

// GlobalContextEntry is the kyverno.io/v2 form of the kyverno.io/v2alpha1
// GlobalContextEntry: the same schema, so the versions convert without loss
// (conversion strategy None).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=gctxentry,categories=kyverno
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type == "Ready")].status`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="REFRESH INTERVAL",type=string,JSONPath=`.spec.apiCall.refreshInterval`
// +kubebuilder:printcolumn:name="LAST REFRESH",type=date,JSONPath=`.status.lastRefreshTime`
// +kubebuilder:printcolumn:name="MESSAGE",type=string,priority=1,JSONPath=`.status.conditions[?(@.type == "Ready")].message`
type GlobalContextEntry struct {
	kyvernov2alpha1.GlobalContextEntry `json:",inline"`
}

// GlobalContextEntryList is a list of GlobalContextEntry.
//
// +kubebuilder:object:root=true
type GlobalContextEntryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlobalContextEntry `json:"items"`
}

// Hub returns a copy of the object as the kyverno.io/v2alpha1 GlobalContextEntry.
func (p *GlobalContextEntry) Hub() runtime.Object {
	h := p.GlobalContextEntry.DeepCopy()
	h.SetGroupVersionKind(kyvernov2alpha1.GroupVersion.WithKind("GlobalContextEntry"))
	return h
}
