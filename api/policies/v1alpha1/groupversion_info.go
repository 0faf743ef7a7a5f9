// Package v1alpha1 serves Kyverno's deprecated policies.kyverno.io/v1alpha1
// (cluster-scoped kinds and PolicyException only, as in Kyverno 1.19), in
// which most of Kyverno's public CEL policy library is written. Each kind
// embeds its policies.kyverno.io/v1 type (the hub), so the schema of every
// version is the same and Hub converts without loss.
//
// +kubebuilder:object:generate=true
// +groupName=policies.kyverno.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "policies.kyverno.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&ValidatingPolicy{}, &ValidatingPolicyList{},
		&MutatingPolicy{}, &MutatingPolicyList{},
		&GeneratingPolicy{}, &GeneratingPolicyList{},
		&DeletingPolicy{}, &DeletingPolicyList{},
		&ImageValidatingPolicy{}, &ImageValidatingPolicyList{},
		&PolicyException{}, &PolicyExceptionList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
