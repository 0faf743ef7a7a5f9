package v2

import (
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpdateRequestKind is the kind of UpdateRequest.
const UpdateRequestKind = "UpdateRequest"

// RequestType is the kind of rule an UpdateRequest carries out.
// +kubebuilder:validation:Enum=mutate;generate;cel-generate;cel-mutate
type RequestType string

// Request types. CELGenerate and CELMutate are, as Kyverno names them,
// the requests of a GeneratingPolicy and of a MutatingPolicy's
// mutate-existing (or of their Namespaced kinds): spec.policy then names
// that policy, not a ClusterPolicy or Policy of the same name.
const (
	Mutate      RequestType = "mutate"
	Generate    RequestType = "generate"
	CELGenerate RequestType = "cel-generate"
	CELMutate   RequestType = "cel-mutate"
)

// UpdateRequestState is the processing state of an UpdateRequest.
// +kubebuilder:validation:Enum=Pending;Failed;Completed;Skip
type UpdateRequestState string

// Update request states.
const (
	Pending   UpdateRequestState = "Pending"
	Failed    UpdateRequestState = "Failed"
	Completed UpdateRequestState = "Completed"
	Skip      UpdateRequestState = "Skip"
)

// UpdateRequest asks the background controller to apply a generate or
// mutate-existing rule to a trigger resource.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=updaterequests,scope=Namespaced,shortName=ur,categories=kyverno;charter
// +kubebuilder:printcolumn:name="POLICY",type=string,JSONPath=".spec.policy"
// +kubebuilder:printcolumn:name="RULETYPE",type=string,JSONPath=".spec.requestType"
// +kubebuilder:printcolumn:name="RESOURCEKIND",type=string,JSONPath=".spec.resource.kind"
// +kubebuilder:printcolumn:name="RESOURCENAME",type=string,JSONPath=".spec.resource.name"
// +kubebuilder:printcolumn:name="RESOURCENAMESPACE",type=string,JSONPath=".spec.resource.namespace",priority=1
// +kubebuilder:printcolumn:name="STATE",type=string,JSONPath=".status.state"
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=".status.message"
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type UpdateRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the work to do.
	Spec UpdateRequestSpec `json:"spec"`

	// Status is the processing state.
	// +optional
	Status UpdateRequestStatus `json:"status,omitzero"`
}

// UpdateRequestSpec is the work an UpdateRequest asks for.
type UpdateRequestSpec struct {
	// Type is the kind of rule: mutate or generate, cel-generate or
	// cel-mutate for a policies.kyverno.io policy.
	// +optional
	Type RequestType `json:"requestType,omitempty"`

	// Policy is the policy's key: "name" or "namespace/name"; Type tells
	// its kind.
	Policy string `json:"policy"`

	// Rule is the rule to apply. Deprecated: use RuleContext.
	// +optional
	Rule string `json:"rule,omitempty"`

	// RuleContext lists the rules to apply, each with its trigger.
	// +optional
	RuleContext []RuleContext `json:"ruleContext,omitempty"`

	// DeleteDownstream asks to delete the downstream resources, e.g. when
	// the trigger was deleted. Deprecated: use RuleContext.
	// +optional
	DeleteDownstream bool `json:"deleteDownstream,omitempty"`

	// Synchronize is the rule's synchronize flag. Deprecated: use RuleContext.
	// +optional
	Synchronize *bool `json:"synchronize,omitempty"`

	// Resource is the trigger resource. Deprecated: use RuleContext.
	// +optional
	Resource kyvernov1.ResourceSpec `json:"resource,omitzero"`

	// Context is the admission request that caused the UpdateRequest.
	// +optional
	Context UpdateRequestSpecContext `json:"context,omitzero"`
}

// RuleContext is one rule to apply and its trigger.
type RuleContext struct {
	// Rule is the rule's name.
	Rule string `json:"rule"`

	// Trigger is the trigger resource.
	Trigger kyvernov1.ResourceSpec `json:"trigger"`

	// DeleteDownstream asks to delete the rule's downstream resources.
	// +optional
	DeleteDownstream bool `json:"deleteDownstream,omitempty"`

	// Synchronize is the rule's synchronize flag.
	// +optional
	Synchronize *bool `json:"synchronize,omitempty"`

	// CacheRestore is true when the request restores a downstream resource
	// found missing.
	// +optional
	CacheRestore *bool `json:"cacheRestore,omitempty"`
}

// UpdateRequestSpecContext is the admission context of an UpdateRequest.
type UpdateRequestSpecContext struct {
	// UserInfo is the requesting user and their roles.
	// +optional
	UserInfo *RequestInfo `json:"userInfo,omitempty"`

	// AdmissionRequestInfo is the admission request.
	// +optional
	AdmissionRequestInfo *AdmissionRequestInfoObject `json:"admissionRequestInfo,omitempty"`
}

// RequestInfo is the requesting user with the roles bound to them.
type RequestInfo struct {
	// Roles are the user's namespaced roles ("namespace:name").
	// +optional
	Roles []string `json:"roles,omitempty"`

	// ClusterRoles are the user's cluster roles.
	// +optional
	ClusterRoles []string `json:"clusterRoles,omitempty"`

	// AdmissionUserInfo is the user as the API server authenticated them.
	// +optional
	AdmissionUserInfo authenticationv1.UserInfo `json:"userInfo,omitzero"`
}

// AdmissionRequestInfoObject carries an admission request.
type AdmissionRequestInfoObject struct {
	// AdmissionRequest is the request.
	// +optional
	AdmissionRequest *admissionv1.AdmissionRequest `json:"admissionRequest,omitempty"`

	// Operation is the request's operation.
	// +optional
	Operation admissionv1.Operation `json:"operation,omitempty"`
}

// UpdateRequestStatus is the processing state of an UpdateRequest.
type UpdateRequestStatus struct {
	// State is Pending, Failed, Completed or Skip.
	// +optional
	State UpdateRequestState `json:"state,omitempty"`

	// Message says why processing failed.
	// +optional
	Message string `json:"message,omitempty"`

	// GeneratedResources are the downstream resources created or updated.
	// +optional
	GeneratedResources []kyvernov1.ResourceSpec `json:"generatedResources,omitempty"`

	// RetryCount is the number of failed attempts.
	// +optional
	RetryCount int `json:"retryCount,omitempty"`
}

// UpdateRequestList is a list of UpdateRequest.
//
// +kubebuilder:object:root=true
type UpdateRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UpdateRequest `json:"items"`
}
