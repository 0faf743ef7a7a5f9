// Package v2alpha1 serves the kyverno.io/v2alpha1 GlobalContextEntry:
// cluster data (a watched resource's objects or a periodic API call's
// answer) that policies read through `globalReference` context entries
// and the CEL globalContext library, with Kyverno's field names and wire
// format.
//
// +kubebuilder:object:generate=true
// +groupName=kyverno.io
package v2alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "kyverno.io", Version: "v2alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &GlobalContextEntry{}, &GlobalContextEntryList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
