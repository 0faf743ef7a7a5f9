// Package v1beta1 serves Kyverno's policies.kyverno.io/v1beta1, the storage
// version of the group, as Kyverno 1.19 stores it. Each kind embeds its
// policies.kyverno.io/v1 type (the hub charter's code works with), so the
// schema of every version is the same and Hub converts without loss.
//
// +kubebuilder:object:generate=true
// +groupName=policies.kyverno.io
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "policies.kyverno.io", Version: "v1beta1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&ValidatingPolicy{}, &ValidatingPolicyList{},
		&NamespacedValidatingPolicy{}, &NamespacedValidatingPolicyList{},
		&MutatingPolicy{}, &MutatingPolicyList{},
		&NamespacedMutatingPolicy{}, &NamespacedMutatingPolicyList{},
		&GeneratingPolicy{}, &GeneratingPolicyList{},
		&NamespacedGeneratingPolicy{}, &NamespacedGeneratingPolicyList{},
		&DeletingPolicy{}, &DeletingPolicyList{},
		&NamespacedDeletingPolicy{}, &NamespacedDeletingPolicyList{},
		&ImageValidatingPolicy{}, &ImageValidatingPolicyList{},
		&NamespacedImageValidatingPolicy{}, &NamespacedImageValidatingPolicyList{},
		&PolicyException{}, &PolicyExceptionList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
