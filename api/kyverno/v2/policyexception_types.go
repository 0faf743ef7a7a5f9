package v2

import (
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyExceptionKind is the kind of PolicyException.
const PolicyExceptionKind = "PolicyException"

// PolicyException exempts the resources it matches from some rules of some
// policies.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:path=policyexceptions,scope=Namespaced,shortName=polex,categories=kyverno;charter
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=".metadata.creationTimestamp"
type PolicyException struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares what is exempted.
	Spec PolicyExceptionSpec `json:"spec"`
}

// PolicyExceptionSpec declares which resources are exempted from which rules.
type PolicyExceptionSpec struct {
	// Background says whether the exception applies in background scans;
	// true when absent.
	// +optional
	Background *bool `json:"background,omitempty"`

	// Match selects the exempted resources.
	Match MatchResources `json:"match"`

	// Conditions must pass for the exception to apply.
	// +optional
	Conditions *kyvernov1.AnyAllConditions `json:"conditions,omitempty"`

	// Exceptions are the policies and rules exempted.
	Exceptions []Exception `json:"exceptions"`

	// PodSecurity exempts Pod Security controls of validate.podSecurity rules.
	// +optional
	PodSecurity []kyvernov1.PodSecurityStandard `json:"podSecurity,omitempty"`
}

// BackgroundProcessingEnabled reports whether the exception applies in
// background scans (true unless background is false).
func (s *PolicyExceptionSpec) BackgroundProcessingEnabled() bool {
	return s.Background == nil || *s.Background
}

// Exception names a policy and some of its rules.
type Exception struct {
	// PolicyName is the policy's name, "namespace/name" for a Policy.
	PolicyName string `json:"policyName"`

	// RuleNames are the exempted rules; wildcards allowed. Autogen rules
	// (autogen-<name>, autogen-cronjob-<name>) must be named explicitly.
	RuleNames []string `json:"ruleNames"`
}

// Contains reports whether the exception covers the given policy and rule.
// policy is the policy's key: "name" for a ClusterPolicy, "namespace/name"
// for a Policy. Rule names are compared exactly or by wildcard (* and ?).
func (e Exception) Contains(policy, rule string) bool {
	if e.PolicyName != policy {
		return false
	}
	for _, pattern := range e.RuleNames {
		if wildcardMatch(pattern, rule) {
			return true
		}
	}
	return false
}

// Contains reports whether any of the exceptions covers policy and rule.
func (s *PolicyExceptionSpec) Contains(policy, rule string) bool {
	for _, e := range s.Exceptions {
		if e.Contains(policy, rule) {
			return true
		}
	}
	return false
}

// PolicyExceptionList is a list of PolicyException.
//
// +kubebuilder:object:root=true
type PolicyExceptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyException `json:"items"`
}

// wildcardMatch matches s against pattern, where * matches any run of
// characters and ? any single character.
func wildcardMatch(pattern, s string) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
