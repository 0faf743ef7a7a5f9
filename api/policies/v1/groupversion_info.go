// Package v1 holds the policies.kyverno.io/v1 API charter serves:
// ValidatingPolicy, NamespacedValidatingPolicy, MutatingPolicy,
// NamespacedMutatingPolicy, GeneratingPolicy,
// NamespacedGeneratingPolicy, DeletingPolicy, NamespacedDeletingPolicy,
// ImageValidatingPolicy, NamespacedImageValidatingPolicy and that group's
// PolicyException, with Kyverno's field names and wire format. These are
// the hub types charter's code works with; v1beta1 (the storage version,
// as in Kyverno 1.19) and v1alpha1 embed them, so every version has one
// schema (api/policies/v1beta1, api/policies/v1alpha1).
//
// The policies carry charter's PolicyStatus (conditions, Ready), as
// ClusterPolicies do, so the status, report and admission controllers
// handle every policy kind alike.
//
// +kubebuilder:object:generate=true
// +groupName=policies.kyverno.io
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of this package.
const Group = "policies.kyverno.io"

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

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
		&PolicyException{}, &PolicyExceptionList{},
		&GeneratingPolicy{}, &GeneratingPolicyList{},
		&NamespacedGeneratingPolicy{}, &NamespacedGeneratingPolicyList{},
		&DeletingPolicy{}, &DeletingPolicyList{},
		&NamespacedDeletingPolicy{}, &NamespacedDeletingPolicyList{},
		&ImageValidatingPolicy{}, &ImageValidatingPolicyList{},
		&NamespacedImageValidatingPolicy{}, &NamespacedImageValidatingPolicyList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
