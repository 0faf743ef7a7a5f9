package background

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// TestGeneratingPolicyExceptionReports: a trigger a PolicyException exempts
// from a GeneratingPolicy gets nothing generated, and its report says so
// with the exception's result (skip, or pass under reportResult: pass) and
// its name, as Kyverno's generating-policies/reports/with-exceptions,
// with-exception-skip-result and with-exception-pass-result expect; a
// trigger no exception names gets its ConfigMap and a pass naming it.
// charter made no UpdateRequest for an exempted trigger (the exception's
// response is named "exception", not after the policy's rule), so its
// report had no result at all.
func TestGeneratingPolicyExceptionReports(t *testing.T) {
	e := startEnv(t)
	e.startControllerWithReports(Options{})
	e.createCELPolicies("gpol-exception.yaml")
	trigger := func(name string) *corev1.Namespace {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"exc-test": "true"}}}
		e.create(ns)
		e.admit(kyvernov1.Create, ns, nil)
		return ns
	}
	for _, tc := range []struct {
		trigger, rule, result, property, want string
	}{
		{trigger: "exc-plain", rule: "gpol-excepted", result: "pass", property: "generated-resources", want: "/v1, Kind=ConfigMap Name=excepted-cm Namespace=exc-plain"},
		{trigger: "exc-skip", rule: "exception", result: "skip", property: "exceptions", want: "gpol-skip"},
		{trigger: "exc-pass", rule: "exception", result: "pass", property: "exceptions", want: "gpol-pass"},
	} {
		ns := trigger(tc.trigger)
		e.eventually(tc.trigger+"'s report", func() error {
			got, err := e.reportProperty("", ns.UID, "KyvernoGeneratingPolicy", "gpol-excepted", tc.rule, tc.result, tc.property)
			if err != nil {
				return err
			}
			if got != tc.want {
				return fmt.Errorf("%s %q, want %q", tc.property, got, tc.want)
			}
			return nil
		})
	}
	for _, ns := range []string{"exc-skip", "exc-pass"} {
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "excepted-cm"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap in %s: %v, want none (the exception exempts it)", ns, err)
		}
	}
}
