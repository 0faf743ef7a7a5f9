package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyResult is the outcome of one rule on one resource.
// +kubebuilder:validation:Enum=pass;fail;warn;error;skip
type PolicyResult string

// Policy results.
const (
	StatusPass  PolicyResult = "pass"
	StatusFail  PolicyResult = "fail"
	StatusWarn  PolicyResult = "warn"
	StatusError PolicyResult = "error"
	StatusSkip  PolicyResult = "skip"
)

// PolicySeverity is the severity of a result.
// +kubebuilder:validation:Enum=critical;high;low;medium;info
type PolicySeverity string

// Severities.
const (
	SeverityCritical PolicySeverity = "critical"
	SeverityHigh     PolicySeverity = "high"
	SeverityMedium   PolicySeverity = "medium"
	SeverityLow      PolicySeverity = "low"
	SeverityInfo     PolicySeverity = "info"
)

// PolicyReportSummary counts a report's results by outcome.
type PolicyReportSummary struct {
	// Pass is the number of passed results.
	// +optional
	Pass int `json:"pass"`
	// Fail is the number of failed results.
	// +optional
	Fail int `json:"fail"`
	// Warn is the number of warnings.
	// +optional
	Warn int `json:"warn"`
	// Error is the number of results that could not be evaluated.
	// +optional
	Error int `json:"error"`
	// Skip is the number of skipped results.
	// +optional
	Skip int `json:"skip"`
}

// Add counts one result.
func (s *PolicyReportSummary) Add(r PolicyResult) {
	switch r {
	case StatusPass:
		s.Pass++
	case StatusFail:
		s.Fail++
	case StatusWarn:
		s.Warn++
	case StatusError:
		s.Error++
	case StatusSkip:
		s.Skip++
	}
}

// Summarize counts results by outcome.
func Summarize(results []PolicyReportResult) PolicyReportSummary {
	var s PolicyReportSummary
	for i := range results {
		s.Add(results[i].Result)
	}
	return s
}

// PolicyReportResult is the outcome of one policy rule on some resources.
type PolicyReportResult struct {
	// Source is the engine that produced the result, e.g. "kyverno".
	// +optional
	Source string `json:"source,omitempty"`

	// Policy is the policy's name, "namespace/name" for a namespaced policy.
	Policy string `json:"policy"`

	// Rule is the rule's name.
	// +optional
	Rule string `json:"rule,omitempty"`

	// Category is the policy's category.
	// +optional
	Category string `json:"category,omitempty"`

	// Severity is the policy's severity.
	// +optional
	Severity PolicySeverity `json:"severity,omitempty"`

	// Timestamp is when the result was produced.
	// +optional
	Timestamp metav1.Timestamp `json:"timestamp,omitzero"`

	// Result is pass, fail, warn, error or skip.
	// +optional
	Result PolicyResult `json:"result,omitempty"`

	// Scored is false for results that are informational only.
	// +optional
	Scored bool `json:"scored,omitempty"`

	// Resources are the checked resources; empty when the report's scope
	// names the resource.
	// +optional
	Resources []corev1.ObjectReference `json:"resources,omitempty"`

	// ResourceSelector selects the checked resources instead of Resources.
	// +optional
	ResourceSelector *metav1.LabelSelector `json:"resourceSelector,omitempty"`

	// Message explains the result.
	// +optional
	Message string `json:"message,omitempty"`

	// Properties are extra key/value data.
	// +optional
	Properties map[string]string `json:"properties,omitempty"`
}
