package v1

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// ValidatingPolicy and ImageValidatingPolicy read validationActions and
// evaluation the same way: [Deny] when no action is set, admission and
// background on unless switched off.
func TestValidationActionsAndEvaluationDefaults(t *testing.T) {
	off := false
	deny, audit, warn := admissionregistrationv1.Deny, admissionregistrationv1.Audit, admissionregistrationv1.Warn
	type spec interface {
		HasAction(admissionregistrationv1.ValidationAction) bool
		AdmissionEnabled() bool
		BackgroundEnabled() bool
	}
	for _, tc := range []struct {
		name                  string
		actions               []admissionregistrationv1.ValidationAction
		eval                  *EvaluationConfiguration
		deny, audit, warn     bool
		admission, background bool
	}{
		{name: "nothing set", deny: true, admission: true, background: true},
		{name: "audit and warn", actions: []admissionregistrationv1.ValidationAction{audit, warn}, audit: true, warn: true, admission: true, background: true},
		{name: "empty evaluation", eval: &EvaluationConfiguration{}, deny: true, admission: true, background: true},
		{name: "admission off", eval: &EvaluationConfiguration{Admission: &AdmissionConfiguration{Enabled: &off}}, deny: true, background: true},
		{name: "background off", eval: &EvaluationConfiguration{Background: &BackgroundConfiguration{Enabled: &off}}, deny: true, admission: true},
	} {
		for kind, s := range map[string]spec{
			"ValidatingPolicy":      &ValidatingPolicySpec{ValidationAction: tc.actions, EvaluationConfiguration: tc.eval},
			"ImageValidatingPolicy": &ImageValidatingPolicySpec{ValidationAction: tc.actions, EvaluationConfiguration: tc.eval},
		} {
			got := [5]bool{s.HasAction(deny), s.HasAction(audit), s.HasAction(warn), s.AdmissionEnabled(), s.BackgroundEnabled()}
			want := [5]bool{tc.deny, tc.audit, tc.warn, tc.admission, tc.background}
			if got != want {
				t.Errorf("%s, %s: Deny/Audit/Warn/admission/background %v, want %v", kind, tc.name, got, want)
			}
		}
	}
}
