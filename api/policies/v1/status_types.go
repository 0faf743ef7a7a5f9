package v1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// The condition types of status.conditionStatus, Kyverno's
// PolicyConditionType values (api/policies.kyverno.io ConditionStatus):
// ready is true only while every condition is True.
const (
	// ConditionWebhookConfigured is True once the admission webhook
	// configurations in the API server were built from the policy's
	// generation. Policies never served at admission do not get it.
	ConditionWebhookConfigured = "WebhookConfigured"
	// ConditionPolicyCached is False while charter's admission policy
	// cache cannot serve the policy's generation, with charter's reason
	// (ReasonFailed: the field-path faults; ReasonUnsupported: the fields
	// charter cannot run in the cluster); absent once it does.
	ConditionPolicyCached = "PolicyCached"
	// ConditionRBACPermissionsGranted is Kyverno's: True ("Policy is ready
	// for reporting.") when the reports controller may get, list and watch
	// every resource the policy matches, False naming what it may not
	// (the policy status controller); False with reason Forbidden while
	// some write of the policy's generate or mutate-existing rules is
	// forbidden to charter, naming the permission, until those writes go
	// through (the background controller).
	ConditionRBACPermissionsGranted = "RBACPermissionsGranted"
	// ConditionExecuted is charter's condition of the DeletingPolicy kinds:
	// True when the latest scheduled run went through, False (reason
	// RunFailed) naming what failed. Absent until the policy's generation
	// first ran.
	ConditionExecuted = "Executed"
)

// Condition reasons. True conditions say ReasonSucceeded, as Kyverno's
// do; a False one carries charter's reason.
const (
	ReasonSucceeded   = kyvernov1.PolicyReasonSucceeded
	ReasonFailed      = kyvernov1.PolicyReasonFailed
	ReasonUnsupported = kyvernov1.PolicyReasonUnsupported
)

// ConditionStatus is Kyverno's status.conditionStatus of every
// policies.kyverno.io kind: the summary Argo CD's health checks and
// `kubectl get` read.
type ConditionStatus struct {
	// Ready is true when every condition is True: the policy is in
	// force. Unset until charter first decided.
	// +optional
	Ready *bool `json:"ready,omitempty"`

	// Conditions are WebhookConfigured, PolicyCached and
	// RBACPermissionsGranted, each with the generation it is about.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Message says why the policy is not ready: the messages of its False
	// conditions. Empty when it is.
	// +optional
	Message string `json:"message,omitempty"`
}

// IsReady reports whether ready is true.
func (s *ConditionStatus) IsReady() bool { return s.Ready != nil && *s.Ready }

// ReadyAt reports whether ready is true and every condition is about
// generation (or a later one): what Argo CD's health checks call Healthy
// rather than Progressing.
func (s *ConditionStatus) ReadyAt(generation int64) bool {
	if !s.IsReady() || len(s.Conditions) == 0 {
		return false
	}
	for _, c := range s.Conditions {
		if c.ObservedGeneration < generation {
			return false
		}
	}
	return true
}

// SummarizedConditions are the conditions ready and message summarise
// (api/conditions writes them with SetSummarized).
func (s *ConditionStatus) SummarizedConditions() *[]metav1.Condition { return &s.Conditions }

// SetSummary writes ready and message.
func (s *ConditionStatus) SetSummary(ready bool, message string) {
	s.Ready, s.Message = &ready, message
}

// PolicyStatus is the status of ValidatingPolicy, MutatingPolicy,
// GeneratingPolicy, ImageValidatingPolicy and their Namespaced forms, in
// Kyverno's shape: conditionStatus, autogen, generated. Readiness and the
// autogen copies live here, never in spec.
type PolicyStatus struct {
	// ConditionStatus is the policy's readiness and its conditions.
	// +optional
	ConditionStatus ConditionStatus `json:"conditionStatus,omitzero"`

	// Autogen holds the policy's copies for Pod controllers (ValidatingPolicy,
	// MutatingPolicy and ImageValidatingPolicy kinds), as Kyverno fills it.
	// Always written, {} when there are none, as Kyverno's is.
	// +optional
	Autogen AutogenStatus `json:"autogen"`

	// Generated is whether a ValidatingAdmissionPolicy or
	// MutatingAdmissionPolicy was generated from the policy: charter
	// generates none, so it is always false.
	// +optional
	Generated bool `json:"generated,omitempty"`

	// Admission says whether the policy acts on requests at admission,
	// its spec's setting with the default applied, for the ADMISSION
	// column (MutatingPolicy kinds); charter's addition.
	// +optional
	Admission *bool `json:"admission,omitempty"`

	// Background says whether background processing is on, its spec's
	// setting with the default applied, for the BACKGROUND column
	// (MutatingPolicy kinds); charter's addition.
	// +optional
	Background *bool `json:"background,omitempty"`
}

// AutogenStatus holds a policy's copies for Pod controllers, by name:
// "defaults" (DaemonSets, Deployments, Jobs, ReplicaSets, StatefulSets)
// and "cronjobs".
type AutogenStatus struct {
	// Configs are the copies by name.
	// +optional
	Configs map[string]AutogenConfig `json:"configs,omitempty"`
}

// AutogenConfig is one copy of a policy for some Pod controllers.
type AutogenConfig struct {
	// Targets are the kinds the copy applies to.
	Targets []AutogenTarget `json:"targets"`
	// Spec is the copy's spec: the policy's, with its match rewritten for
	// the targets and object.X read under their Pod template.
	Spec *runtime.RawExtension `json:"spec"`
}

// AutogenTarget is a kind an autogen copy applies to.
type AutogenTarget struct {
	// +optional
	Group    string `json:"group,omitempty"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
	Kind     string `json:"kind"`
}

// DeletingPolicyStatus is the status of DeletingPolicy and
// NamespacedDeletingPolicy, in Kyverno's shape: conditionStatus and
// lastExecutionTime.
type DeletingPolicyStatus struct {
	// ConditionStatus is the policy's readiness and its conditions.
	// +optional
	ConditionStatus ConditionStatus `json:"conditionStatus,omitzero"`

	// LastExecutionTime is when the policy last ran.
	// +optional
	LastExecutionTime *metav1.Time `json:"lastExecutionTime,omitempty"`
}

// StatusHolder is a policies.kyverno.io policy with Kyverno's PolicyStatus.
//
// +kubebuilder:object:generate=false
type StatusHolder interface {
	kyvernov1.PolicyInterface
	// GetStatus returns the status (not a copy).
	GetStatus() *PolicyStatus
}

// ReadyAt reports whether p's status says it is ready at its generation:
// the Ready condition of a ClusterPolicy or Policy True and about that
// generation, or status.conditionStatus ready with every condition about
// it.
func ReadyAt(p kyvernov1.PolicyInterface) bool {
	switch p := p.(type) {
	case StatusHolder:
		return p.GetStatus().ConditionStatus.ReadyAt(p.GetGeneration())
	case kyvernov1.StatusHolder:
		c := meta.FindStatusCondition(p.GetStatus().Conditions, kyvernov1.PolicyConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == p.GetGeneration()
	}
	return false
}
