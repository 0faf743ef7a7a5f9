// Package v1beta1 serves Kyverno's deprecated kyverno.io/v1beta1
// UpdateRequest. It embeds the kyverno.io/v2 type (the storage version and
// hub), so both versions have one schema and Hub converts without loss.
//
// +kubebuilder:object:generate=true
// +groupName=kyverno.io
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "kyverno.io", Version: "v1beta1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&UpdateRequest{}, &UpdateRequestList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
