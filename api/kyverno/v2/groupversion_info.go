// Package v2 holds the kyverno.io/v2 API: PolicyException, CleanupPolicy,
// ClusterCleanupPolicy and UpdateRequest, with Kyverno's field names and
// wire format, and serves GlobalContextEntry as kyverno.io/v2 (the
// kyverno.io/v2alpha1 type embedded). It reuses the kyverno.io/v1 building blocks (resource filters,
// conditions, context entries) so the engine matches both alike.
//
// +kubebuilder:object:generate=true
// +groupName=kyverno.io
package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "kyverno.io", Version: "v2"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&PolicyException{}, &PolicyExceptionList{},
		&CleanupPolicy{}, &CleanupPolicyList{},
		&ClusterCleanupPolicy{}, &ClusterCleanupPolicyList{},
		&UpdateRequest{}, &UpdateRequestList{},
		&GlobalContextEntry{}, &GlobalContextEntryList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
