package v1

import (
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Mutation changes the matching resource, or other existing resources when
// Targets is set.
type Mutation struct {
	// MutateExistingOnPolicyUpdate mutates existing targets when the policy
	// is created or updated. It overrides the policy-level field.
	// +optional
	MutateExistingOnPolicyUpdate *bool `json:"mutateExistingOnPolicyUpdate,omitempty"`

	// Targets are existing resources to mutate instead of the trigger.
	// +optional
	Targets []TargetResourceSpec `json:"targets,omitempty"`

	// RawPatchStrategicMerge is a strategic merge patch with Kyverno anchors.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	RawPatchStrategicMerge *apiextv1.JSON `json:"patchStrategicMerge,omitempty"`

	// PatchesJSON6902 is an RFC 6902 JSON patch, written as YAML or JSON.
	// +optional
	PatchesJSON6902 string `json:"patchesJson6902,omitempty"`

	// ForEachMutation applies patches per element of a list.
	// +optional
	ForEachMutation []ForEachMutation `json:"foreach,omitempty"`
}

// IsMutateExisting reports whether the rule mutates existing resources.
func (m *Mutation) IsMutateExisting() bool { return m != nil && len(m.Targets) > 0 }

// ForeachOrder is the order foreach elements are processed in.
// +kubebuilder:validation:Enum=Ascending;Descending
type ForeachOrder string

// Foreach orders.
const (
	Ascending  ForeachOrder = "Ascending"
	Descending ForeachOrder = "Descending"
)

// ForEachMutation applies a patch to each element of List.
type ForEachMutation struct {
	// List is a JMESPath expression yielding the elements.
	// +optional
	List string `json:"list,omitempty"`

	// Order is the processing order; Descending by default for JSON
	// patches that remove elements.
	// +optional
	Order *ForeachOrder `json:"order,omitempty"`

	// Context adds variables, evaluated per element.
	// +optional
	Context []ContextEntry `json:"context,omitempty"`

	// AnyAllConditions are preconditions evaluated per element.
	// +optional
	// +kubebuilder:validation:XPreserveUnknownFields
	AnyAllConditions *AnyAllConditions `json:"preconditions,omitempty"`

	// RawPatchStrategicMerge is a strategic merge patch.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	RawPatchStrategicMerge *apiextv1.JSON `json:"patchStrategicMerge,omitempty"`

	// PatchesJSON6902 is an RFC 6902 JSON patch.
	// +optional
	PatchesJSON6902 string `json:"patchesJson6902,omitempty"`

	// ForEachMutation is a nested list of ForEachMutation, kept as raw JSON
	// because CRD schemas cannot recurse.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	ForEachMutation *apiextv1.JSON `json:"foreach,omitempty"`
}

// ResourceSpec names one resource.
type ResourceSpec struct {
	// APIVersion of the resource.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind of the resource.
	// +optional
	Kind string `json:"kind,omitempty"`
	// Namespace of the resource.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the resource.
	// +optional
	Name string `json:"name,omitempty"`
	// UID of the resource.
	// +optional
	UID types.UID `json:"uid,omitempty"`
}

// TargetSelector selects resources by name or labels.
type TargetSelector struct {
	ResourceSpec `json:",inline"`

	// Selector selects the resources by label.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// TargetResourceSpec selects existing resources for mutation.
type TargetResourceSpec struct {
	TargetSelector `json:",inline"`

	// Context adds variables, evaluated per target.
	// +optional
	Context []ContextEntry `json:"context,omitempty"`

	// RawAnyAllConditions are preconditions evaluated per target.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	RawAnyAllConditions *apiextv1.JSON `json:"preconditions,omitempty"`
}
