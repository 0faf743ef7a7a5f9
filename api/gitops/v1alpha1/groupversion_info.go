// Package v1alpha1 holds charter's gitops.charter.dev/v1alpha1 API: the
// PolicyRepository, a Git repository whose policies charter keeps applied.
//
// +kubebuilder:object:generate=true
// +groupName=gitops.charter.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "gitops.charter.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &PolicyRepository{}, &PolicyRepositoryList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
