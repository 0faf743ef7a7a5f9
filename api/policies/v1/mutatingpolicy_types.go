package v1

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// Kinds of the mutating policies.
const (
	MutatingPolicyKind           = "MutatingPolicy"
	NamespacedMutatingPolicyKind = "NamespacedMutatingPolicy"
)

// MutatingPolicy mutates resources with CEL expressions (ApplyConfiguration
// or JSONPatch), in every namespace and for cluster-scoped resources.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=mutatingpolicies,scope=Cluster,shortName=mpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="ADMISSION",type=boolean,JSONPath=".status.admission"
// +kubebuilder:printcolumn:name="BACKGROUND",type=boolean,JSONPath=".status.background"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.conditionStatus.message`
type MutatingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares what the policy matches and how it mutates.
	Spec MutatingPolicySpec `json:"spec"`

	// Status is what charter observed about the policy.
	// +optional
	Status PolicyStatus `json:"status,omitzero"`
}

// MutatingPolicyList is a list of MutatingPolicy.
//
// +kubebuilder:object:root=true
type MutatingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MutatingPolicy `json:"items"`
}

// NamespacedMutatingPolicy is a MutatingPolicy that acts only on resources
// of its own namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=namespacedmutatingpolicies,scope=Namespaced,shortName=nmpol,categories=kyverno;charter
// +kubebuilder:printcolumn:name="ADMISSION",type=boolean,JSONPath=".status.admission"
// +kubebuilder:printcolumn:name="BACKGROUND",type=boolean,JSONPath=".status.background"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditionStatus.ready`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="MESSAGE",type=string,JSONPath=`.status.conditionStatus.message`
type NamespacedMutatingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares what the policy matches and how it mutates.
	Spec MutatingPolicySpec `json:"spec"`

	// Status is what charter observed about the policy.
	// +optional
	Status PolicyStatus `json:"status,omitzero"`
}

// NamespacedMutatingPolicyList is a list of NamespacedMutatingPolicy.
//
// +kubebuilder:object:root=true
type NamespacedMutatingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespacedMutatingPolicy `json:"items"`
}

// MutatingPolicySpec is what a MutatingPolicy matches and how it mutates.
// The building blocks are MutatingAdmissionPolicy's.
type MutatingPolicySpec struct {
	// MatchConstraints select the requests the policy mutates; at least
	// one resource rule is required.
	// +optional
	MatchConstraints *admissionregistrationv1.MatchResources `json:"matchConstraints,omitempty"`

	// FailurePolicy says what an error does at admission: Fail (default)
	// denies the request, Ignore admits it unchanged by this policy.
	// +optional
	// +kubebuilder:validation:Enum=Ignore;Fail
	FailurePolicy *admissionregistrationv1.FailurePolicyType `json:"failurePolicy,omitempty"`

	// AuditAnnotations are CEL expressions whose string values go into the
	// policy's report results as properties.
	// +listType=atomic
	// +optional
	AuditAnnotations []admissionregistrationv1.AuditAnnotation `json:"auditAnnotations,omitempty"`

	// MatchConditions must all hold for the policy to mutate a request.
	// They may use the variables.
	// +listType=map
	// +listMapKey=name
	// +optional
	MatchConditions []admissionregistrationv1.MatchCondition `json:"matchConditions,omitempty"`

	// Variables are named CEL expressions, available as variables.<name>.
	// +listType=map
	// +listMapKey=name
	// +optional
	Variables []admissionregistrationv1.Variable `json:"variables,omitempty"`

	// AutogenConfiguration says for which Pod controllers the policy is
	// also applied.
	// +optional
	AutogenConfiguration *MutatingPolicyAutogenConfiguration `json:"autogen,omitempty"`

	// TargetMatchConstraints select the existing resources a
	// mutate-existing policy patches.
	// +optional
	TargetMatchConstraints *TargetMatchConstraints `json:"targetMatchConstraints,omitempty"`

	// TargetMatchConditions must all hold for an existing resource to be
	// patched.
	// +listType=map
	// +listMapKey=name
	// +optional
	TargetMatchConditions []admissionregistrationv1.MatchCondition `json:"targetMatchConditions,omitempty"`

	// Mutations run in order, each on the previous one's result.
	// +listType=atomic
	// +optional
	Mutations []admissionregistrationv1.Mutation `json:"mutations,omitempty"`

	// WebhookConfiguration tunes the policy's admission webhook.
	// +optional
	WebhookConfiguration *WebhookConfiguration `json:"webhookConfiguration,omitempty"`

	// EvaluationConfiguration says where the policy is evaluated.
	// +optional
	EvaluationConfiguration *MutatingPolicyEvaluationConfiguration `json:"evaluation,omitempty"`

	// ReinvocationPolicy IfNeeded runs the policy again when a later
	// mutation changed the object; Never (default) runs it once.
	// +optional
	// +kubebuilder:validation:Enum=Never;IfNeeded
	ReinvocationPolicy admissionregistrationv1.ReinvocationPolicyType `json:"reinvocationPolicy,omitempty"`
}

// TargetMatchConstraints select existing resources: by resource rules and
// selectors, or by a CEL expression returning an object or a list.
type TargetMatchConstraints struct {
	admissionregistrationv1.MatchResources `json:",inline"`
	// Expression returns the targets: one object, or a list with items.
	// +optional
	Expression string `json:"expression,omitempty"`
}

// MutatingPolicyAutogenConfiguration configures autogen.
type MutatingPolicyAutogenConfiguration struct {
	// PodControllers selects the Pod controllers a Pod policy also applies
	// to.
	// +optional
	PodControllers *PodControllersGenerationConfiguration `json:"podControllers,omitempty"`
	// MutatingAdmissionPolicy asks for a generated
	// MutatingAdmissionPolicy; charter does not generate one.
	// +optional
	MutatingAdmissionPolicy *MAPGenerationConfiguration `json:"mutatingAdmissionPolicy,omitempty"`
}

// MAPGenerationConfiguration asks for a generated MutatingAdmissionPolicy.
type MAPGenerationConfiguration struct {
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// MutatingPolicyEvaluationConfiguration says where a MutatingPolicy is
// evaluated.
type MutatingPolicyEvaluationConfiguration struct {
	// Mode is Kubernetes (default); other modes are refused.
	// +optional
	Mode string `json:"mode,omitempty"`
	// Admission controls mutation at admission.
	// +optional
	Admission *AdmissionConfiguration `json:"admission,omitempty"`
	// Background controls evaluation in background scans.
	// +optional
	Background *BackgroundConfiguration `json:"background,omitempty"`
	// MutateExisting makes a matching request patch the existing targets
	// through the background controller. Default false.
	// +optional
	MutateExisting *MutateExistingConfiguration `json:"mutateExisting,omitempty"`
	// SkipBackgroundRequests skips requests made by the background
	// controller. Default true.
	// +optional
	SkipBackgroundRequests *bool `json:"skipBackgroundRequests,omitempty"`
	// UseServerSideApply merges ApplyConfigurations without the atomic
	// field check. Default false.
	// +optional
	UseServerSideApply *bool `json:"useServerSideApply,omitempty"`
}

// MutateExistingConfiguration controls mutate-existing.
type MutateExistingConfiguration struct {
	// Enabled defaults to false.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// AdmissionEnabled is evaluation.admission.enabled, true by default.
func (s *MutatingPolicySpec) AdmissionEnabled() bool {
	e := s.EvaluationConfiguration
	return e == nil || e.Admission == nil || e.Admission.Enabled == nil || *e.Admission.Enabled
}

// BackgroundEnabled is evaluation.background.enabled, true by default.
func (s *MutatingPolicySpec) BackgroundEnabled() bool {
	e := s.EvaluationConfiguration
	return e == nil || e.Background == nil || e.Background.Enabled == nil || *e.Background.Enabled
}

// MutateExistingEnabled is evaluation.mutateExisting.enabled, false by
// default.
func (s *MutatingPolicySpec) MutateExistingEnabled() bool {
	e := s.EvaluationConfiguration
	return e != nil && e.MutateExisting != nil && e.MutateExisting.Enabled != nil && *e.MutateExisting.Enabled
}

// GetFailurePolicy is Fail unless Ignore is set.
func (s *MutatingPolicySpec) GetFailurePolicy() admissionregistrationv1.FailurePolicyType {
	if s.FailurePolicy != nil && *s.FailurePolicy == admissionregistrationv1.Ignore {
		return admissionregistrationv1.Ignore
	}
	return admissionregistrationv1.Fail
}

// GetReinvocationPolicy is IfNeeded or Never (the default).
func (s *MutatingPolicySpec) GetReinvocationPolicy() admissionregistrationv1.ReinvocationPolicyType {
	if s.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy {
		return admissionregistrationv1.IfNeededReinvocationPolicy
	}
	return admissionregistrationv1.NeverReinvocationPolicy
}

// KyvernoSpec is a MutatingPolicy's settings in ClusterPolicy terms, for
// the controllers that read those: admission and background switches,
// failure policy and webhook timeout. Its mutations are compiled from the
// MutatingPolicySpec itself. With evaluation.mutateExisting it has one
// mutate-existing rule named after the policy, as a GeneratingPolicy has
// one generate rule: UpdateRequests and the background controller handle
// it like a ClusterPolicy's mutate-existing rule, while the engine selects
// the targets from targetMatchConstraints. It also runs for every
// existing trigger when the policy is created or changed
// (mutateExistingOnPolicyUpdate true), as Kyverno's policy controller
// does for a MutatingPolicy with mutateExisting (every object of its
// matchConstraints is a trigger). Such a policy is served at admission
// even with evaluation.admission disabled, since its admission requests
// are its triggers; the engine then patches nothing at admission. It is
// built on each call, so writing to it changes nothing.
func (s *MutatingPolicySpec) KyvernoSpec(name string) *kyvernov1.Spec {
	admission, background := s.AdmissionEnabled() || s.MutateExistingEnabled(), s.BackgroundEnabled()
	out := &kyvernov1.Spec{Admission: &admission, Background: &background}
	fp := kyvernov1.Fail
	if s.GetFailurePolicy() == admissionregistrationv1.Ignore {
		fp = kyvernov1.Ignore
	}
	out.FailurePolicy = &fp
	if w := s.WebhookConfiguration; w != nil && w.TimeoutSeconds != nil {
		t := *w.TimeoutSeconds
		out.WebhookTimeoutSeconds = &t
	}
	if s.MutateExistingEnabled() {
		onPolicyUpdate := true
		rule := kyvernov1.Rule{
			Name: name,
			Mutation: &kyvernov1.Mutation{
				MutateExistingOnPolicyUpdate: &onPolicyUpdate,
				// One empty target marks the rule mutate-existing.
				Targets: []kyvernov1.TargetResourceSpec{{}},
			},
		}
		if s.matchesDelete() {
			// A deleted object triggers the rule only when the policy
			// asks for DELETE, as for a ClusterPolicy's rule.
			rule.MatchResources.ResourceDescription.Operations = []kyvernov1.AdmissionOperation{kyvernov1.Delete}
		}
		if e := s.EvaluationConfiguration; e != nil && e.SkipBackgroundRequests != nil {
			skip := *e.SkipBackgroundRequests
			rule.SkipBackgroundRequests = &skip
		}
		out.Rules = []kyvernov1.Rule{rule}
	}
	return out
}

// matchesDelete reports whether a resource rule of matchConstraints
// selects DELETE requests.
func (s *MutatingPolicySpec) matchesDelete() bool {
	if s.MatchConstraints == nil {
		return false
	}
	for _, r := range s.MatchConstraints.ResourceRules {
		for _, op := range r.Operations {
			if op == admissionregistrationv1.Delete || op == admissionregistrationv1.OperationAll {
				return true
			}
		}
	}
	return false
}

// MutatingPolicyLike is what MutatingPolicy and NamespacedMutatingPolicy
// have in common. Both are also kyvernov1.PolicyInterface, so every
// controller that handles ClusterPolicies handles them; their GetSpec is a
// view (see KyvernoSpec).
//
// +kubebuilder:object:generate=false
type MutatingPolicyLike interface {
	kyvernov1.PolicyInterface
	// GetMutatingPolicySpec returns the spec (not a copy).
	GetMutatingPolicySpec() *MutatingPolicySpec
}

var (
	_ MutatingPolicyLike = (*MutatingPolicy)(nil)
	_ MutatingPolicyLike = (*NamespacedMutatingPolicy)(nil)
)

// GetMutatingPolicySpec returns the spec.
func (p *MutatingPolicy) GetMutatingPolicySpec() *MutatingPolicySpec { return &p.Spec }

// GetSpec returns the policy's settings in ClusterPolicy terms (see
// MutatingPolicySpec.KyvernoSpec).
func (p *MutatingPolicy) GetSpec() *kyvernov1.Spec { return p.Spec.KyvernoSpec(p.Name) }

// GetStatus returns the policy's status.
func (p *MutatingPolicy) GetStatus() *PolicyStatus { return &p.Status }

// IsNamespaced is false.
func (p *MutatingPolicy) IsNamespaced() bool { return false }

// GetKind returns "MutatingPolicy".
func (p *MutatingPolicy) GetKind() string { return MutatingPolicyKind }

// IsReady reports whether status.conditionStatus.ready is true.
func (p *MutatingPolicy) IsReady() bool { return p.Status.ConditionStatus.IsReady() }

// CreateDeepCopy returns a deep copy as a PolicyInterface.
func (p *MutatingPolicy) CreateDeepCopy() kyvernov1.PolicyInterface { return p.DeepCopy() }

// GetMutatingPolicySpec returns the spec.
func (p *NamespacedMutatingPolicy) GetMutatingPolicySpec() *MutatingPolicySpec { return &p.Spec }

// GetSpec returns the policy's settings in ClusterPolicy terms (see
// MutatingPolicySpec.KyvernoSpec).
func (p *NamespacedMutatingPolicy) GetSpec() *kyvernov1.Spec { return p.Spec.KyvernoSpec(p.Name) }

// GetStatus returns the policy's status.
func (p *NamespacedMutatingPolicy) GetStatus() *PolicyStatus { return &p.Status }

// IsNamespaced is true: the policy acts in its own namespace only.
func (p *NamespacedMutatingPolicy) IsNamespaced() bool { return true }

// GetKind returns "NamespacedMutatingPolicy".
func (p *NamespacedMutatingPolicy) GetKind() string { return NamespacedMutatingPolicyKind }

// IsReady reports whether status.conditionStatus.ready is true.
func (p *NamespacedMutatingPolicy) IsReady() bool { return p.Status.ConditionStatus.IsReady() }

// CreateDeepCopy returns a deep copy as a PolicyInterface.
func (p *NamespacedMutatingPolicy) CreateDeepCopy() kyvernov1.PolicyInterface {
	return p.DeepCopy()
}
