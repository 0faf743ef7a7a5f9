package reports

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/charter-dev/charter/webhook/metrics"
)

// Background scans record Kyverno's policy metrics through the same
// recorder admission uses, once per real evaluation: a scan that skips an
// unchanged resource records nothing, a forced rescan records again.
func TestBackgroundScanMetrics(t *testing.T) {
	e := startEnv(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "reports-test"}}
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := e.apply("pod.yaml")
	reg := prometheus.NewRegistry()
	rec, err := metrics.New(reg, "test")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := e.startController(Options{Metrics: rec})
	// require-team matches Pods only, and the Pod is the only one: every
	// evaluation the controller counts is one of the Pod.
	e.apply("require-team.yaml")
	e.wantResults("the Pod's report", "reports-test", string(pod.GetUID()), "require-team/team-label=fail")

	series := map[string]string{
		"policy_name": "require-team", "policy_type": "cluster", "policy_namespace": "-",
		"policy_validation_mode": "audit", "policy_background_mode": "true",
		"rule_name": "team-label", "rule_result": "fail", "rule_type": "validate",
		"resource_kind": "Pod", "resource_namespace": "reports-test",
		"resource_request_operation": "create", "rule_execution_cause": metrics.CauseBackground, "dry_run": "false",
	}
	// samples returns the results counter and the execution histogram's
	// count of the series, and checks they agree with the evaluations.
	samples := func() (float64, error) {
		results, executions, err := gatherSeries(reg, series)
		if err != nil {
			return 0, err
		}
		if evaluations := c.Stats().Evaluations.Load(); results != float64(evaluations) || executions != uint64(evaluations) {
			return 0, fmt.Errorf("%v results and %d timings recorded, want one each per evaluation (%d)", results, executions, evaluations)
		}
		return results, nil
	}
	var first float64
	e.eventually("the first scan's metrics", func() (err error) {
		first, err = samples()
		if err == nil && first == 0 {
			err = fmt.Errorf("nothing recorded")
		}
		return err
	})

	t.Run("a scan that skips the unchanged Pod records nothing", func(t *testing.T) {
		c.mu.Lock()
		w := c.watchers[schema.GroupVersionResource{Version: "v1", Resource: "pods"}]
		c.mu.Unlock()
		if w == nil {
			t.Fatal("pods are not watched")
		}
		skipped := c.Stats().Skipped.Load()
		if err := w.scan(e.ctx, c, false); err != nil {
			t.Fatal(err)
		}
		if c.Stats().Skipped.Load() == skipped {
			t.Fatal("the scan skipped nothing; the test exercises nothing")
		}
		if n, err := samples(); err != nil || n != first {
			t.Errorf("after a skipping scan: %v results (%v), want %v", n, err, first)
		}
	})

	t.Run("a forced rescan records each evaluation", func(t *testing.T) {
		if err := c.FullRescan(e.ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := samples(); err != nil || n != first+1 {
			t.Errorf("after a full rescan: %v results (%v), want %v", n, err, first+1)
		}
	})
}

// gatherSeries returns the value of kyverno_policy_results_total and the
// sample count of kyverno_policy_execution_duration_seconds for the series
// carrying every one of labels; given every label but the scope labels,
// that is exactly one series of each.
func gatherSeries(reg prometheus.Gatherer, labels map[string]string) (results float64, executions uint64, err error) {
	families, err := reg.Gather()
	if err != nil {
		return 0, 0, err
	}
	for _, f := range families {
	series:
		for _, m := range f.GetMetric() {
			matched := 0
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok {
					if want != l.GetValue() {
						continue series
					}
					matched++
				}
			}
			if matched != len(labels) {
				continue
			}
			switch f.GetName() {
			case metrics.PolicyResultsTotal:
				results += m.GetCounter().GetValue()
			case metrics.PolicyExecutionDuration:
				executions += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return results, executions, nil
}
