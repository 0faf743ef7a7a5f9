// Package v2beta1 serves kyverno.io/v2beta1: PolicyException, the version
// most published Kyverno exceptions are still written in, ClusterPolicy and
// Policy (hub and storage kyverno.io/v1), CleanupPolicy and
// ClusterCleanupPolicy (hub and storage kyverno.io/v2) and
// GlobalContextEntry (hub and storage kyverno.io/v2alpha1). Each has the
// schema of its hub version, so conversion is a copy (strategy None):
// Kyverno's own v2beta1 schemas of ClusterPolicy and CleanupPolicy are a
// stricter subset of the hub's, so every object Kyverno admits in v2beta1
// is admitted here too, and nothing written in one version is lost when
// read in another.
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
	s.AddKnownTypes(GroupVersion,
		&PolicyException{}, &PolicyExceptionList{},
		&ClusterPolicy{}, &ClusterPolicyList{},
		&Policy{}, &PolicyList{},
		&CleanupPolicy{}, &CleanupPolicyList{},
		&ClusterCleanupPolicy{}, &ClusterCleanupPolicyList{},
		&GlobalContextEntry{}, &GlobalContextEntryList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
