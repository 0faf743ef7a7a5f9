// Package v1 holds the kyverno.io/v1 API: ClusterPolicy and Policy, with the
// same field names and wire format as Kyverno's, so existing policies load
// unchanged.
//
// charter never writes defaults into a policy's spec (see DESIGN.md): optional
// booleans whose Kyverno default is true are pointers here, and helper methods
// (Spec.BackgroundProcessingEnabled, ImageVerification.IsRequired, ...) apply
// the documented default when a field is absent.
//
// The package depends on apimachinery and k8s.io/api only, so the engine can
// import it without pulling in controller-runtime.
//
// +kubebuilder:object:generate=true
// +groupName=kyverno.io
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "kyverno.io", Version: "v1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&ClusterPolicy{}, &ClusterPolicyList{},
		&Policy{}, &PolicyList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
