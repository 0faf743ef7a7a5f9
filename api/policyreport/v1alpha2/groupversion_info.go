// Package v1alpha2 holds the wgpolicyk8s.io/v1alpha2 PolicyReport and
// ClusterPolicyReport of the Kubernetes Policy working group, in the exact
// wire format its CRD defines, so tools such as Policy Reporter read
// charter's reports.
//
// +kubebuilder:object:generate=true
// +groupName=wgpolicyk8s.io
package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the objects in this package.
	GroupVersion = schema.GroupVersion{Group: "wgpolicyk8s.io", Version: "v1alpha2"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&PolicyReport{}, &PolicyReportList{},
		&ClusterPolicyReport{}, &ClusterPolicyReportList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
