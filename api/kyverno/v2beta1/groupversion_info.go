// Package v2beta1 serves the kyverno.io/v2beta1 PolicyException, the
// version most published Kyverno exceptions are still written in. Its wire
// format is that of kyverno.io/v2, so the spec is the v2 type and
// conversion is a copy; v2 is the storage version.
//
// +kubebuilder:object:generate=true
// +groupName=kyverno.io
package v2beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "kyverno.io", Version: "v2beta1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &PolicyException{}, &PolicyExceptionList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
