package v1

import (
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// Kinds of this package.
const (
	ValidatingPolicyKind           = "ValidatingPolicy"
	NamespacedValidatingPolicyKind = "NamespacedValidatingPolicy"
	PolicyExceptionKind            = "PolicyException"
)

// ValidatingPolicy validates resources with CEL expressions, in every
// namespace and for cluster-scoped resources.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=validatingpolicies,scope=Cluster,shortName=vpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type ValidatingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares what the policy matches and validates.
	Spec ValidatingPolicySpec `json:"spec"`

	// Status is what charter observed about the policy.
	// +optional
	Status PolicyStatus `json:"status,omitzero"`
}

// ValidatingPolicyList is a list of ValidatingPolicy.
//
// +kubebuilder:object:root=true
type ValidatingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ValidatingPolicy `json:"items"`
}

// NamespacedValidatingPolicy is a ValidatingPolicy that acts only on
// resources of its own namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=namespacedvalidatingpolicies,scope=Namespaced,shortName=nvpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type NamespacedValidatingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares what the policy matches and validates.
	Spec ValidatingPolicySpec `json:"spec"`

	// Status is what charter observed about the policy.
	// +optional
	Status PolicyStatus `json:"status,omitzero"`
}

// NamespacedValidatingPolicyList is a list of NamespacedValidatingPolicy.
//
// +kubebuilder:object:root=true
type NamespacedValidatingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespacedValidatingPolicy `json:"items"`
}

// ValidatingPolicySpec is what a ValidatingPolicy matches and validates.
// The building blocks are ValidatingAdmissionPolicy's.
type ValidatingPolicySpec struct {
	// MatchConstraints select the requests the policy validates; at least
	// one resource rule is required.
	// +optional
	MatchConstraints *admissionregistrationv1.MatchResources `json:"matchConstraints,omitempty"`

	// Validations are CEL expressions that must all hold; the first that
	// does not fails the policy.
	// +listType=atomic
	// +optional
	Validations []admissionregistrationv1.Validation `json:"validations,omitempty"`

	// FailurePolicy says what a matchCondition that cannot be evaluated
	// does: Fail (default) makes it an error, Ignore skips the policy.
	// +optional
	// +kubebuilder:validation:Enum=Ignore;Fail
	FailurePolicy *admissionregistrationv1.FailurePolicyType `json:"failurePolicy,omitempty"`

	// AuditAnnotations are CEL expressions whose string values go into the
	// policy's report results as properties.
	// +listType=atomic
	// +optional
	AuditAnnotations []admissionregistrationv1.AuditAnnotation `json:"auditAnnotations,omitempty"`

	// MatchConditions must all hold for the policy to validate a request.
	// +listType=map
	// +listMapKey=name
	// +optional
	MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions,omitempty"`

	// Variables are named CEL expressions, available as variables.<name>
	// in validations and audit annotations.
	// +listType=map
	// +listMapKey=name
	// +optional
	Variables []admissionregistrationv1.Variable `json:"variables,omitempty"`

	// AutogenConfiguration says for which Pod controllers the policy is
	// also applied.
	// +optional
	AutogenConfiguration *ValidatingPolicyAutogenConfiguration `json:"autogen,omitempty"`

	// ValidationActions say what a failure does: Deny the request, Warn
	// the client, Audit in reports. Empty means Deny.
	// +listType=set
	// +kubebuilder:validation:items:Enum=Deny;Audit;Warn
	// +optional
	ValidationAction []admissionregistrationv1.ValidationAction `json:"validationActions,omitempty"`

	// WebhookConfiguration tunes the policy's admission webhook.
	// +optional
	WebhookConfiguration *WebhookConfiguration `json:"webhookConfiguration,omitempty"`

	// EvaluationConfiguration says where the policy is evaluated.
	// +optional
	EvaluationConfiguration *EvaluationConfiguration `json:"evaluation,omitempty"`
}

// ValidatingPolicyAutogenConfiguration configures autogen.
type ValidatingPolicyAutogenConfiguration struct {
	// PodControllers selects the Pod controllers a Pod policy also applies
	// to.
	// +optional
	PodControllers *PodControllersGenerationConfiguration `json:"podControllers,omitempty"`
	// ValidatingAdmissionPolicy asks for a generated
	// ValidatingAdmissionPolicy; charter does not generate one.
	// +optional
	ValidatingAdmissionPolicy *VapGenerationConfiguration `json:"validatingAdmissionPolicy,omitempty"`
}

// PodControllersGenerationConfiguration selects Pod controllers.
type PodControllersGenerationConfiguration struct {
	// Enabled turns autogen off when false. Default true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Controllers lists the controllers (daemonsets, deployments, jobs,
	// statefulsets, replicasets, cronjobs). Unset means all; empty means
	// none.
	// +optional
	Controllers []string `json:"controllers,omitempty"`
}

// VapGenerationConfiguration asks for a generated ValidatingAdmissionPolicy.
type VapGenerationConfiguration struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// WebhookConfiguration tunes a policy's admission webhook.
type WebhookConfiguration struct {
	// TimeoutSeconds is the webhook timeout, 1 to 30 seconds.
	// +optional
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}

// EvaluationConfiguration says where a policy is evaluated.
type EvaluationConfiguration struct {
	// Mode is Kubernetes (default) or JSON. charter evaluates Kubernetes
	// mode; other modes are refused.
	// +optional
	Mode string `json:"mode,omitempty"`
	// Admission controls evaluation at admission.
	// +optional
	Admission *AdmissionConfiguration `json:"admission,omitempty"`
	// Background controls evaluation in background scans.
	// +optional
	Background *BackgroundConfiguration `json:"background,omitempty"`
}

// AdmissionConfiguration controls evaluation at admission.
type AdmissionConfiguration struct {
	// Enabled defaults to true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// BackgroundConfiguration controls evaluation in background scans.
type BackgroundConfiguration struct {
	// Enabled defaults to true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Interval overrides the scan interval for this policy.
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
}

// Evaluation modes.
const (
	EvaluationModeKubernetes = "Kubernetes"
	EvaluationModeJSON       = "JSON"
)

// AdmissionEnabled is evaluation.admission.enabled, true by default.
func (s *ValidatingPolicySpec) AdmissionEnabled() bool {
	return s.EvaluationConfiguration.admissionEnabled()
}

// BackgroundEnabled is evaluation.background.enabled, true by default.
func (s *ValidatingPolicySpec) BackgroundEnabled() bool {
	return s.EvaluationConfiguration.backgroundEnabled()
}

// Actions returns the validation actions, [Deny] when none are set.
func (s *ValidatingPolicySpec) Actions() []admissionregistrationv1.ValidationAction {
	return validationActions(s.ValidationAction)
}

// HasAction reports whether the policy has the validation action.
func (s *ValidatingPolicySpec) HasAction(a admissionregistrationv1.ValidationAction) bool {
	return slices.Contains(s.Actions(), a)
}

// validationActions is what ValidatingPolicy and ImageValidatingPolicy do
// with validationActions: as set, or [Deny] when none is.
func validationActions(set []admissionregistrationv1.ValidationAction) []admissionregistrationv1.ValidationAction {
	if len(set) == 0 {
		return []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
	}
	return set
}

// admissionEnabled is admission.enabled, true by default (also when e is
// nil: no evaluation block at all).
func (e *EvaluationConfiguration) admissionEnabled() bool {
	return e == nil || e.Admission == nil || orTrue(e.Admission.Enabled)
}

// backgroundEnabled is background.enabled, true by default.
func (e *EvaluationConfiguration) backgroundEnabled() bool {
	return e == nil || e.Background == nil || orTrue(e.Background.Enabled)
}

// GetFailurePolicy is Fail unless Ignore is set.
func (s *ValidatingPolicySpec) GetFailurePolicy() admissionregistrationv1.FailurePolicyType {
	if s.FailurePolicy != nil && *s.FailurePolicy == admissionregistrationv1.Ignore {
		return admissionregistrationv1.Ignore
	}
	return admissionregistrationv1.Fail
}

// ValidatingPolicyLike is what ValidatingPolicy and
// NamespacedValidatingPolicy have in common. Both are also
// kyvernov1.PolicyInterface, so every controller that handles
// ClusterPolicies handles them; their GetSpec is a view (see KyvernoSpec).
//
// +kubebuilder:object:generate=false
type ValidatingPolicyLike interface {
	kyvernov1.PolicyInterface
	// GetValidatingPolicySpec returns the spec (not a copy).
	GetValidatingPolicySpec() *ValidatingPolicySpec
}

var (
	_ ValidatingPolicyLike = (*ValidatingPolicy)(nil)
	_ ValidatingPolicyLike = (*NamespacedValidatingPolicy)(nil)
)

// KyvernoSpec is a ValidatingPolicy's settings in ClusterPolicy terms, for
// the controllers that read those: admission and background switches,
// failure policy, webhook timeout, and the failure action (Enforce when the
// policy denies, Audit otherwise; emitWarning for Warn). It has no rules:
// the validations are compiled from the ValidatingPolicySpec itself. It is
// built on each call, so writing to it changes nothing.
func (s *ValidatingPolicySpec) KyvernoSpec() *kyvernov1.Spec {
	admission, background := s.AdmissionEnabled(), s.BackgroundEnabled()
	out := &kyvernov1.Spec{Admission: &admission, Background: &background}
	fp := kyvernov1.Fail
	if s.GetFailurePolicy() == admissionregistrationv1.Ignore {
		fp = kyvernov1.Ignore
	}
	out.FailurePolicy = &fp
	out.ValidationFailureAction = kyvernov1.Audit
	if s.HasAction(admissionregistrationv1.Deny) {
		out.ValidationFailureAction = kyvernov1.Enforce
	}
	if s.HasAction(admissionregistrationv1.Warn) {
		warn := true
		out.EmitWarning = &warn
	}
	if w := s.WebhookConfiguration; w != nil && w.TimeoutSeconds != nil {
		t := *w.TimeoutSeconds
		out.WebhookTimeoutSeconds = &t
	}
	return out
}

// GetValidatingPolicySpec returns the spec.
func (p *ValidatingPolicy) GetValidatingPolicySpec() *ValidatingPolicySpec { return &p.Spec }

// GetSpec returns the policy's settings in ClusterPolicy terms (see
// ValidatingPolicySpec.KyvernoSpec).
func (p *ValidatingPolicy) GetSpec() *kyvernov1.Spec { return p.Spec.KyvernoSpec() }

// GetStatus returns the policy's status.
func (p *ValidatingPolicy) GetStatus() *PolicyStatus { return &p.Status }

// IsNamespaced is false.
func (p *ValidatingPolicy) IsNamespaced() bool { return false }

// GetKind returns "ValidatingPolicy".
func (p *ValidatingPolicy) GetKind() string { return ValidatingPolicyKind }

// IsReady reports whether status.conditionStatus.ready is true.
func (p *ValidatingPolicy) IsReady() bool { return p.Status.ConditionStatus.IsReady() }

// CreateDeepCopy returns a deep copy as a PolicyInterface.
func (p *ValidatingPolicy) CreateDeepCopy() kyvernov1.PolicyInterface { return p.DeepCopy() }

// GetValidatingPolicySpec returns the spec.
func (p *NamespacedValidatingPolicy) GetValidatingPolicySpec() *ValidatingPolicySpec {
	return &p.Spec
}

// GetSpec returns the policy's settings in ClusterPolicy terms (see
// ValidatingPolicySpec.KyvernoSpec).
func (p *NamespacedValidatingPolicy) GetSpec() *kyvernov1.Spec { return p.Spec.KyvernoSpec() }

// GetStatus returns the policy's status.
func (p *NamespacedValidatingPolicy) GetStatus() *PolicyStatus { return &p.Status }

// IsNamespaced is true: the policy acts in its own namespace only.
func (p *NamespacedValidatingPolicy) IsNamespaced() bool { return true }

// GetKind returns "NamespacedValidatingPolicy".
func (p *NamespacedValidatingPolicy) GetKind() string { return NamespacedValidatingPolicyKind }

// IsReady reports whether status.conditionStatus.ready is true.
func (p *NamespacedValidatingPolicy) IsReady() bool { return p.Status.ConditionStatus.IsReady() }

// CreateDeepCopy returns a deep copy as a PolicyInterface.
func (p *NamespacedValidatingPolicy) CreateDeepCopy() kyvernov1.PolicyInterface {
	return p.DeepCopy()
}
