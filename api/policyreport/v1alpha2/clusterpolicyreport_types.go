package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterPolicyReport holds the results of policies on cluster-scoped resources.
// charter writes one report per resource, with the resource as its scope.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=clusterpolicyreports,scope=Cluster,shortName=cpolr,categories=charter
// +kubebuilder:printcolumn:name="KIND",type=string,JSONPath=".scope.kind"
// +kubebuilder:printcolumn:name="NAME",type=string,JSONPath=".scope.name"
// +kubebuilder:printcolumn:name="PASS",type=integer,JSONPath=".summary.pass"
// +kubebuilder:printcolumn:name="FAIL",type=integer,JSONPath=".summary.fail"
// +kubebuilder:printcolumn:name="WARN",type=integer,JSONPath=".summary.warn"
// +kubebuilder:printcolumn:name="ERROR",type=integer,JSONPath=".summary.error"
// +kubebuilder:printcolumn:name="SKIP",type=integer,JSONPath=".summary.skip"
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type ClusterPolicyReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Scope is the resource the report is about.
	// +optional
	Scope *corev1.ObjectReference `json:"scope,omitempty"`

	// ScopeSelector selects the resources the report is about, instead of
	// Scope.
	// +optional
	ScopeSelector *metav1.LabelSelector `json:"scopeSelector,omitempty"`

	// Summary counts the results by outcome.
	// +optional
	Summary PolicyReportSummary `json:"summary,omitzero"`

	// Results are the results.
	// +optional
	Results []PolicyReportResult `json:"results,omitempty"`
}

// ClusterPolicyReportList is a list of ClusterPolicyReport.
//
// +kubebuilder:object:root=true
type ClusterPolicyReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterPolicyReport `json:"items"`
}
