package v1

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyException exempts the requests its matchConditions select from
// the policies it names (policies.kyverno.io kinds), fully, or partly
// through exceptions.allowedImages and exceptions.allowedValues. In
// charter test and apply it acts only on requests in its own namespace; in
// the cluster charter honours it only from the namespaces it trusts for
// exceptions (--exception-namespaces), and there it acts in any namespace,
// as kyverno.io PolicyExceptions do.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=policyexceptions,scope=Namespaced,shortName=celpolex,categories=kyverno;charter
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type PolicyException struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares the exception.
	Spec PolicyExceptionSpec `json:"spec"`
}

// PolicyExceptionList is a list of PolicyException.
//
// +kubebuilder:object:root=true
type PolicyExceptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyException `json:"items"`
}

// PolicyExceptionSpec declares which policies an exception applies to and
// when.
type PolicyExceptionSpec struct {
	// PolicyRefs name the policies the exception applies to.
	// +kubebuilder:validation:MinItems=1
	PolicyRefs []PolicyRef `json:"policyRefs"`

	// MatchConditions are CEL expressions, evaluated in the referenced
	// policy's environment; when all hold, the exception applies. None
	// means always.
	// +optional
	MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions,omitempty"`

	// Images are exposed to the policy as exceptions.allowedImages.
	// +optional
	Images []string `json:"images,omitempty"`

	// AllowedValues are exposed to the policy as exceptions.allowedValues.
	// +optional
	AllowedValues []string `json:"allowedValues,omitempty"`

	// ReportResult is the result of an exempted request: skip (default)
	// or pass.
	// +optional
	// +kubebuilder:validation:Enum=skip;pass
	ReportResult string `json:"reportResult,omitempty"`

	// ExpiresAt ends the exception.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// Properties are free-form notes (reason, ticket, approver).
	// +optional
	Properties map[string]string `json:"properties,omitempty"`

	// EvaluationMode is accepted for compatibility and not used.
	// +optional
	EvaluationMode string `json:"evaluationMode,omitempty"`
}

// PolicyRef names a policy by kind and name.
type PolicyRef struct {
	// Name of the policy.
	Name string `json:"name"`
	// Kind of the policy, e.g. ValidatingPolicy.
	Kind string `json:"kind"`
}
