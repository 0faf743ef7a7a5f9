package background

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// TestCELExceptionStopsBackground: a policies.kyverno.io PolicyException
// spares what it selects from a GeneratingPolicy (generateExisting) and
// from a mutate-existing MutatingPolicy in the background controller, as
// it does at admission and in reports (issue #32: the controller compiled
// its set without this group's exceptions). The same policies act where
// the exception does not select.
func TestCELExceptionStopsBackground(t *testing.T) {
	e := startEnv(t)
	for _, ns := range []string{"cx-open", "cx-excepted"} {
		e.namespace(ns)
		e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings", Labels: map[string]string{"roll": "yes"}}})
	}
	metrics := &generatingMetrics{}
	_, state := e.startController(Options{MaxAttempts: 2, RetryBase: 100 * time.Millisecond, Metrics: metrics})
	// The exception is known to the process before the policies are, so
	// no policy ever runs without it.
	exception := e.createCELPolicies("cel-exception.yaml")[0]
	e.eventually("the exception installed", func() error {
		if !slices.ContainsFunc(state.Policies.Installed().CELExceptions, func(ex *policiesv1.PolicyException) bool { return ex.GetUID() == exception.GetUID() }) {
			return fmt.Errorf("not among the installed exceptions yet")
		}
		return nil
	})
	e.createCELPolicies("cel-excepted-policies.yaml")

	e.eventually("generateExisting: the ConfigMap generated in cx-open", func() error {
		return e.cl.Get(e.ctx, client.ObjectKey{Namespace: "cx-open", Name: "generated"}, &corev1.ConfigMap{})
	})
	e.eventually("generateExisting: cx-excepted skipped by the exception", func() error {
		if want := "gpol-excepted Namespace cx-excepted  skip"; !metrics.saw(want) {
			return fmt.Errorf("no run %q among %q", want, metrics.seen())
		}
		return nil
	})
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "cx-excepted", Name: "generated"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("the GeneratingPolicy generated into the excepted namespace (err %v)", err)
	}

	trigger := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cx-open", Name: "trigger", Labels: map[string]string{"trigger": "yes"}}}
	e.create(trigger)
	e.admit(kyvernov1.Create, trigger, nil)
	e.eventually("mutate-existing: cx-open's ConfigMap labelled", func() error {
		l, err := e.configMapLabels("cx-open", "settings")
		if err != nil {
			return err
		}
		if l["rolled"] != "yes" {
			return fmt.Errorf("labels %v", l)
		}
		return nil
	})
	e.updateRequestsDone("mpol-excepted")
	if l, err := e.configMapLabels("cx-excepted", "settings"); err != nil || l["rolled"] != "" {
		t.Errorf("the MutatingPolicy mutated the excepted namespace's ConfigMap (labels %v, err %v)", l, err)
	}
}
