package v1

import (
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Generation creates or clones resources when a trigger resource matches.
type Generation struct {
	// GenerateExisting generates for triggers that already exist when the
	// policy is created. It overrides the policy-level field.
	// +optional
	GenerateExisting *bool `json:"generateExisting,omitempty"`

	// Synchronize keeps the downstream resources in step with the rule and
	// deletes them when the trigger goes away.
	// +optional
	Synchronize bool `json:"synchronize,omitempty"`

	// OrphanDownstreamOnPolicyDelete keeps synchronized downstream resources
	// when the policy or rule is deleted.
	// +optional
	OrphanDownstreamOnPolicyDelete bool `json:"orphanDownstreamOnPolicyDelete,omitempty"`

	GeneratePattern `json:",inline"`

	// ForEachGeneration generates per element of a list.
	// +optional
	ForEachGeneration []ForEachGeneration `json:"foreach,omitempty"`
}

// GeneratePattern is what to generate: a resource built from Data, or a copy
// of one (Clone) or several (CloneList) existing resources.
type GeneratePattern struct {
	// ResourceSpec names the downstream resource (not used with CloneList).
	ResourceSpec `json:",inline"`

	// RawData is the downstream resource's content.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	RawData *apiextv1.JSON `json:"data,omitempty"`

	// Clone copies one existing resource.
	// +optional
	Clone CloneFrom `json:"clone,omitzero"`

	// CloneList copies the resources of some kinds in a namespace.
	// +optional
	CloneList CloneList `json:"cloneList,omitzero"`
}

// CloneFrom names the resource to clone.
type CloneFrom struct {
	// Namespace of the source.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the source.
	// +optional
	Name string `json:"name,omitempty"`
}

// CloneList selects resources to clone.
type CloneList struct {
	// Namespace of the sources.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Kinds of the sources, as apiVersion/Kind.
	// +optional
	Kinds []string `json:"kinds,omitempty"`
	// Selector selects the sources by label.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// ForEachGeneration generates per element of List.
type ForEachGeneration struct {
	// List is a JMESPath expression yielding the elements.
	List string `json:"list"`

	// Context adds variables, evaluated per element.
	// +optional
	Context []ContextEntry `json:"context,omitempty"`

	// AnyAllConditions are preconditions evaluated per element.
	// +optional
	// +kubebuilder:validation:XPreserveUnknownFields
	AnyAllConditions *AnyAllConditions `json:"preconditions,omitempty"`

	GeneratePattern `json:",inline"`
}

// GenerateType is how a generate rule produces its downstream resources.
type GenerateType string

// Generate types.
const (
	GenerateData  GenerateType = "Data"
	GenerateClone GenerateType = "Clone"
)

// Type returns whether the pattern generates from data or by cloning.
func (g *GeneratePattern) Type() GenerateType {
	if g.RawData != nil {
		return GenerateData
	}
	return GenerateClone
}
