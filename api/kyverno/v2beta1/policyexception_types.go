package v2beta1

import (
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PolicyException is the kyverno.io/v2beta1 form of a PolicyException.
// Deprecated: use kyverno.io/v2.
//
// +kubebuilder:object:root=true
// +kubebuilder:deprecatedversion:warning="kyverno.io/v2beta1 PolicyException is deprecated; use kyverno.io/v2"
// +kubebuilder:resource:path=policyexceptions,scope=Namespaced,shortName=polex,categories=kyverno;charter
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type PolicyException struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares what is exempted.
	Spec kyvernov2.PolicyExceptionSpec `json:"spec"`
}

// ToV2 returns the exception as kyverno.io/v2 (a deep copy).
func (e *PolicyException) ToV2() *kyvernov2.PolicyException {
	out := &kyvernov2.PolicyException{ObjectMeta: *e.ObjectMeta.DeepCopy(), Spec: *e.Spec.DeepCopy()}
	out.APIVersion = kyvernov2.GroupVersion.String()
	out.Kind = kyvernov2.PolicyExceptionKind
	return out
}

// Hub returns a copy of the exception as a kyverno.io/v2 PolicyException.
func (e *PolicyException) Hub() runtime.Object { return e.ToV2() }

// PolicyExceptionList is a list of PolicyException.
//
// +kubebuilder:object:root=true
type PolicyExceptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyException `json:"items"`
}
