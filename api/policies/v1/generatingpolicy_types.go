package v1

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// Kinds of the generating policies.
const (
	GeneratingPolicyKind           = "GeneratingPolicy"
	NamespacedGeneratingPolicyKind = "NamespacedGeneratingPolicy"
)

// GeneratingPolicy creates resources (downstream objects) with CEL
// expressions when the resources it matches (triggers) are admitted or,
// with generateExisting, already exist.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=generatingpolicies,scope=Cluster,shortName=gpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type GeneratingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares what the policy matches and generates.
	Spec GeneratingPolicySpec `json:"spec"`

	// Status is what charter observed about the policy.
	// +optional
	Status PolicyStatus `json:"status,omitzero"`
}

// GeneratingPolicyList is a list of GeneratingPolicy.
//
// +kubebuilder:object:root=true
type GeneratingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GeneratingPolicy `json:"items"`
}

// NamespacedGeneratingPolicy is a GeneratingPolicy that acts only on
// triggers of its own namespace and generates only into it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=namespacedgeneratingpolicies,scope=Namespaced,shortName=ngpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type NamespacedGeneratingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares what the policy matches and generates.
	Spec GeneratingPolicySpec `json:"spec"`

	// Status is what charter observed about the policy.
	// +optional
	Status PolicyStatus `json:"status,omitzero"`
}

// NamespacedGeneratingPolicyList is a list of NamespacedGeneratingPolicy.
//
// +kubebuilder:object:root=true
type NamespacedGeneratingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespacedGeneratingPolicy `json:"items"`
}

// GeneratingPolicySpec is what a GeneratingPolicy matches and generates.
type GeneratingPolicySpec struct {
	// MatchConstraints select the triggers; at least one resource rule is
	// required.
	// +optional
	MatchConstraints *admissionregistrationv1.MatchResources `json:"matchConstraints,omitempty"`

	// MatchConditions must all hold for the policy to generate for a
	// trigger.
	// +listType=map
	// +listMapKey=name
	// +optional
	MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions,omitempty"`

	// Variables are named CEL expressions, available as variables.<name>
	// in the generate expressions.
	// +listType=map
	// +listMapKey=name
	// +optional
	Variables []admissionregistrationv1.Variable `json:"variables,omitempty"`

	// EvaluationConfiguration says when the policy generates and what
	// happens to its downstream objects later.
	// +optional
	EvaluationConfiguration *GeneratingPolicyEvaluationConfiguration `json:"evaluation,omitempty"`

	// WebhookConfiguration tunes the policy's admission webhook.
	// +optional
	WebhookConfiguration *WebhookConfiguration `json:"webhookConfiguration,omitempty"`

	// UseServerSideApply asks for server-side apply of the downstream
	// objects; charter always applies them server-side.
	// +optional
	UseServerSideApply bool `json:"useServerSideApply,omitempty"`

	// Generation lists what the policy generates, in order.
	// +listType=atomic
	Generation []Generation `json:"generate"`

	// AuditAnnotations are CEL expressions whose string values go into the
	// trigger's report result as properties, evaluated after the generate
	// entries.
	// +listType=atomic
	// +optional
	AuditAnnotations []admissionregistrationv1.AuditAnnotation `json:"auditAnnotations,omitempty"`
}

// Generation is one generate entry: a CEL expression, normally
// generator.Apply(namespace, [objects]), or a template.
type Generation struct {
	// Expression is a CEL expression of type bool.
	// +optional
	Expression string `json:"expression,omitempty"`
	// Template is a YAML template of the objects, with (( expr ))
	// placeholders when it interpolates cel.
	// +optional
	Template *GenerationTemplate `json:"template,omitempty"`
}

// GenerationTemplate is a YAML template of downstream objects.
type GenerationTemplate struct {
	// Value is the YAML, several documents allowed.
	Value string `json:"value"`
	// Interpolate is none (the default: the YAML is taken as it is) or
	// cel: a value that is exactly (( expr )) is replaced by the
	// expression's result, a placeholder inside other text by its scalar
	// result, and \(( is a literal ((.
	// +optional
	Interpolate string `json:"interpolate,omitempty"`
}

// GeneratingPolicyEvaluationConfiguration says when a GeneratingPolicy
// generates and what happens to its downstream objects later.
type GeneratingPolicyEvaluationConfiguration struct {
	// Admission controls generation for admitted triggers.
	// +optional
	Admission *AdmissionConfiguration `json:"admission,omitempty"`
	// GenerateExisting generates for triggers that exist when the policy
	// is created or changed.
	// +optional
	GenerateExisting *EnabledConfiguration `json:"generateExisting,omitempty"`
	// Synchronize keeps the downstream objects as the policy says (drift
	// is reverted) and deletes them when their trigger goes away.
	// +optional
	Synchronize *EnabledConfiguration `json:"synchronize,omitempty"`
	// OrphanDownstreamOnPolicyDelete keeps the downstream objects of a
	// synchronized policy when the policy is deleted.
	// +optional
	OrphanDownstreamOnPolicyDelete *EnabledConfiguration `json:"orphanDownstreamOnPolicyDelete,omitempty"`
	// SkipBackgroundRequests (default true) ignores requests made by
	// charter's background controller.
	// +optional
	SkipBackgroundRequests *bool `json:"skipBackgroundRequests,omitempty"`
}

// EnabledConfiguration is a switch.
type EnabledConfiguration struct {
	// Enabled defaults to false.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
}

// AdmissionEnabled is evaluation.admission.enabled, true by default.
func (s *GeneratingPolicySpec) AdmissionEnabled() bool {
	e := s.EvaluationConfiguration
	return e == nil || e.Admission == nil || e.Admission.Enabled == nil || *e.Admission.Enabled
}

// GenerateExistingEnabled is evaluation.generateExisting.enabled.
func (s *GeneratingPolicySpec) GenerateExistingEnabled() bool {
	e := s.EvaluationConfiguration
	return e != nil && e.GenerateExisting != nil && e.GenerateExisting.Enabled
}

// SynchronizeEnabled is evaluation.synchronize.enabled.
func (s *GeneratingPolicySpec) SynchronizeEnabled() bool {
	e := s.EvaluationConfiguration
	return e != nil && e.Synchronize != nil && e.Synchronize.Enabled
}

// OrphanDownstreamOnPolicyDeleteEnabled is
// evaluation.orphanDownstreamOnPolicyDelete.enabled.
func (s *GeneratingPolicySpec) OrphanDownstreamOnPolicyDeleteEnabled() bool {
	e := s.EvaluationConfiguration
	return e != nil && e.OrphanDownstreamOnPolicyDelete != nil && e.OrphanDownstreamOnPolicyDelete.Enabled
}

// GeneratingPolicyLike is what GeneratingPolicy and
// NamespacedGeneratingPolicy have in common. Both are also
// kyvernov1.PolicyInterface; their GetSpec is a view (see KyvernoSpec).
//
// +kubebuilder:object:generate=false
type GeneratingPolicyLike interface {
	kyvernov1.PolicyInterface
	// GetGeneratingPolicySpec returns the spec (not a copy).
	GetGeneratingPolicySpec() *GeneratingPolicySpec
}

var (
	_ GeneratingPolicyLike = (*GeneratingPolicy)(nil)
	_ GeneratingPolicyLike = (*NamespacedGeneratingPolicy)(nil)
)

// KyvernoSpec is a GeneratingPolicy in ClusterPolicy terms, for the
// controllers that read those (the webhook configuration, UpdateRequests,
// the background controller): one generate rule named after the policy,
// as Kyverno names the rule of a GeneratingPolicy's results, carrying
// synchronize, orphanDownstreamOnPolicyDelete and generateExisting. Its
// match and generate patterns are empty: the engine evaluates the
// policy's own matchConstraints and expressions. There are no background
// scans. It is built on each call, so writing to it changes nothing.
func (s *GeneratingPolicySpec) KyvernoSpec(name string) *kyvernov1.Spec {
	admission, background := s.AdmissionEnabled(), false
	existing := s.GenerateExistingEnabled()
	fp := kyvernov1.Ignore
	out := &kyvernov1.Spec{
		Admission: &admission, Background: &background, FailurePolicy: &fp,
		Rules: []kyvernov1.Rule{{
			Name: name,
			Generation: &kyvernov1.Generation{
				Synchronize:                    s.SynchronizeEnabled(),
				OrphanDownstreamOnPolicyDelete: s.OrphanDownstreamOnPolicyDeleteEnabled(),
				GenerateExisting:               &existing,
			},
		}},
	}
	if e := s.EvaluationConfiguration; e != nil && e.SkipBackgroundRequests != nil {
		skip := *e.SkipBackgroundRequests
		out.Rules[0].SkipBackgroundRequests = &skip
	}
	if w := s.WebhookConfiguration; w != nil && w.TimeoutSeconds != nil {
		t := *w.TimeoutSeconds
		out.WebhookTimeoutSeconds = &t
	}
	return out
}

// GetGeneratingPolicySpec returns the spec.
func (p *GeneratingPolicy) GetGeneratingPolicySpec() *GeneratingPolicySpec { return &p.Spec }

// GetSpec returns the policy in ClusterPolicy terms (see
// GeneratingPolicySpec.KyvernoSpec).
func (p *GeneratingPolicy) GetSpec() *kyvernov1.Spec { return p.Spec.KyvernoSpec(p.Name) }

// GetStatus returns the policy's status.
func (p *GeneratingPolicy) GetStatus() *PolicyStatus { return &p.Status }

// IsNamespaced is false.
func (p *GeneratingPolicy) IsNamespaced() bool { return false }

// GetKind returns "GeneratingPolicy".
func (p *GeneratingPolicy) GetKind() string { return GeneratingPolicyKind }

// IsReady reports whether status.conditionStatus.ready is true.
func (p *GeneratingPolicy) IsReady() bool { return p.Status.ConditionStatus.IsReady() }

// CreateDeepCopy returns a deep copy as a PolicyInterface.
func (p *GeneratingPolicy) CreateDeepCopy() kyvernov1.PolicyInterface { return p.DeepCopy() }

// GetGeneratingPolicySpec returns the spec.
func (p *NamespacedGeneratingPolicy) GetGeneratingPolicySpec() *GeneratingPolicySpec {
	return &p.Spec
}

// GetSpec returns the policy in ClusterPolicy terms (see
// GeneratingPolicySpec.KyvernoSpec).
func (p *NamespacedGeneratingPolicy) GetSpec() *kyvernov1.Spec { return p.Spec.KyvernoSpec(p.Name) }

// GetStatus returns the policy's status.
func (p *NamespacedGeneratingPolicy) GetStatus() *PolicyStatus { return &p.Status }

// IsNamespaced is true: the policy acts in its own namespace only.
func (p *NamespacedGeneratingPolicy) IsNamespaced() bool { return true }

// GetKind returns "NamespacedGeneratingPolicy".
func (p *NamespacedGeneratingPolicy) GetKind() string { return NamespacedGeneratingPolicyKind }

// IsReady reports whether status.conditionStatus.ready is true.
func (p *NamespacedGeneratingPolicy) IsReady() bool { return p.Status.ConditionStatus.IsReady() }

// CreateDeepCopy returns a deep copy as a PolicyInterface.
func (p *NamespacedGeneratingPolicy) CreateDeepCopy() kyvernov1.PolicyInterface {
	return p.DeepCopy()
}
