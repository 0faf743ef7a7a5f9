package admission

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/webhook/config"
	"github.com/charter-dev/charter/webhook/metrics"
)

// TestMetricsOnRealAPIServer checks the admission metrics against a real
// API server: the policy changes the informers see (a policy that existed
// before charter started counts as created; a status write is no
// update), the rule info of the installed policies, and the mutate rule
// results of a Pod created through the API server.
func TestMetricsOnRealAPIServer(t *testing.T) {
	f := startAdmission(t, withObjects(policyFile(t, "require-team.yaml")))
	ctx, cl := f.ctx, f.client

	changes := func(policy, change string) func() (float64, error) {
		return func() (float64, error) {
			v, _, err := sample(f.metrics, metrics.PolicyChangesTotal, map[string]string{"policy_name": policy, "policy_change_type": change})
			return v, err
		}
	}

	t.Run("the event drop counter is exported before any drop", func(t *testing.T) {
		if v, n, err := sample(f.metrics, metrics.EventsDroppedTotal, map[string]string{"otel_scope_name": "kyverno"}); err != nil || v != 0 || n != 1 {
			t.Errorf("%s: %v in %d series (%v), want 0 in 1", metrics.EventsDroppedTotal, v, n, err)
		}
	})

	t.Run("a policy there before charter started counts as created", func(t *testing.T) {
		eventuallyEqual(t, "require-team created", changes("require-team", "created"), 1)
		want := map[string]string{"policy_validation_mode": "audit", "policy_type": "cluster", "policy_background_mode": "true",
			"policy_namespace": "-", "otel_scope_name": "kyverno", "otel_scope_version": "", "otel_scope_schema_url": ""}
		if v, n, err := sample(f.metrics, metrics.PolicyChangesTotal, want); err != nil || v != 1 || n != 1 {
			t.Errorf("%s with labels %v: value %v in %d series (%v), want 1 in 1", metrics.PolicyChangesTotal, want, v, n, err)
		}
	})

	mutate := policyFile(t, "add-team-label.yaml")
	if err := cl.Create(ctx, mutate); err != nil {
		t.Fatal(err)
	}
	t.Run("a new policy counts as created, its status writes as nothing", func(t *testing.T) {
		eventuallyEqual(t, "add-team-label created", changes("add-team-label", "created"), 1)
		eventually(t, "add-team-label Ready", 30*time.Second, func() error {
			var p kyvernov1.ClusterPolicy
			if err := cl.Get(ctx, client.ObjectKeyFromObject(mutate), &p); err != nil {
				return err
			}
			if !p.IsReady() {
				return errNotYet("add-team-label not Ready yet")
			}
			return nil
		})
		// The status controller has written the status; give the
		// informer a moment to deliver that update.
		time.Sleep(time.Second)
		if v, err := changes("add-team-label", "updated")(); err != nil || v != 0 {
			t.Errorf("add-team-label updated %v times (%v) after status writes only, want 0", v, err)
		}
	})

	t.Run("every rule of every policy, autogen's included, has its rule info", func(t *testing.T) {
		ruleInfo := func(policy string) func() (float64, error) {
			return func() (float64, error) {
				v, _, err := sample(f.metrics, metrics.PolicyRuleInfo, map[string]string{"policy_name": policy, "status_ready": "true"})
				return v, err
			}
		}
		// add-team and autogen-add-team, autogen-cronjob-add-team.
		eventuallyEqual(t, "add-team-label rule info", ruleInfo("add-team-label"), 3)
		eventuallyEqual(t, "require-team rule info", ruleInfo("require-team"), 3)
		want := map[string]string{"policy_name": "add-team-label", "rule_name": "autogen-cronjob-add-team", "rule_type": "mutate",
			"status_ready": "true", "policy_validation_mode": "audit", "policy_type": "cluster", "policy_background_mode": "false",
			"policy_namespace": "-", "otel_scope_name": "kyverno", "otel_scope_version": "", "otel_scope_schema_url": ""}
		if v, n, err := sample(f.metrics, metrics.PolicyRuleInfo, want); err != nil || v != 1 || n != 1 {
			t.Errorf("%s with labels %v: value %v in %d series (%v), want 1 in 1", metrics.PolicyRuleInfo, want, v, n, err)
		}
	})

	t.Run("a Pod is mutated and the mutate rule's result recorded", func(t *testing.T) {
		eventually(t, "mutating webhook for pods", 30*time.Second, func() error {
			var m admissionregistrationv1.MutatingWebhookConfiguration
			if err := cl.Get(ctx, client.ObjectKey{Name: config.ResourceMutatingName}, &m); err != nil {
				return err
			}
			for _, w := range m.Webhooks {
				for _, r := range w.Rules {
					for _, res := range r.Resources {
						if w.Name == config.MutateWebhookFail && res == "pods" {
							return nil
						}
					}
				}
			}
			return errNotYet("no pods rule in " + config.MutateWebhookFail)
		})
		eventually(t, "Pod mutated", 30*time.Second, func() error {
			p := pod("mutated", nil)
			if err := cl.Create(ctx, p); err != nil {
				return err
			}
			if p.Labels["team"] == "platform" {
				return nil
			}
			// The webhook was not called yet (configuration not in the
			// API server's cache): try again.
			_ = cl.Delete(ctx, p)
			eventually(t, "Pod deleted", 30*time.Second, func() error {
				if err := cl.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}); err == nil {
					return errNotYet("still there")
				}
				return nil
			})
			return errNotYet("Pod admitted without the team label")
		})
		want := map[string]string{
			"policy_name": "add-team-label", "policy_type": "cluster", "policy_namespace": "-", "policy_validation_mode": "audit",
			"policy_background_mode": "false", "rule_name": "add-team", "rule_type": "mutate", "rule_result": "pass",
			"resource_kind": "Pod", "resource_namespace": "default", "resource_request_operation": "create",
			"rule_execution_cause": "admission_request", "dry_run": "false",
			"otel_scope_name": "kyverno", "otel_scope_version": "", "otel_scope_schema_url": "",
		}
		for _, name := range []string{metrics.PolicyResultsTotal, metrics.PolicyExecutionDuration} {
			if v, n, err := sample(f.metrics, name, want); err != nil || v != 1 || n != 1 {
				t.Errorf("%s with labels %v: %v samples in %d series (%v), want 1 in 1", name, want, v, n, err)
			}
		}
		// The Audit validate rule saw the mutated Pod.
		validated := map[string]string{"policy_name": "require-team", "rule_type": "validate", "rule_result": "pass", "resource_request_operation": "create"}
		if v, _, err := sample(f.metrics, metrics.PolicyResultsTotal, validated); err != nil || v != 1 {
			t.Errorf("%s with labels %v: %v (%v), want 1", metrics.PolicyResultsTotal, validated, v, err)
		}
	})

	t.Run("a spec edit counts as updated, a delete as deleted", func(t *testing.T) {
		eventually(t, "add-team-label edited", 30*time.Second, func() error {
			var p kyvernov1.ClusterPolicy
			if err := cl.Get(ctx, client.ObjectKeyFromObject(mutate), &p); err != nil {
				return err
			}
			p.Spec.Rules[0].Mutation.RawPatchStrategicMerge.Raw = []byte(`{"metadata":{"labels":{"+(team)":"web"}}}`)
			return cl.Update(ctx, &p)
		})
		eventuallyEqual(t, "add-team-label updated", changes("add-team-label", "updated"), 1)
		if err := cl.Delete(ctx, mutate); err != nil {
			t.Fatal(err)
		}
		eventuallyEqual(t, "add-team-label deleted", changes("add-team-label", "deleted"), 1)
		eventuallyEqual(t, "add-team-label rule info gone", func() (float64, error) {
			_, n, err := sample(f.metrics, metrics.PolicyRuleInfo, map[string]string{"policy_name": "add-team-label"})
			return float64(n), err
		}, 0)
		if v, err := changes("add-team-label", "updated")(); err != nil || v != 1 {
			t.Errorf("add-team-label updated %v times (%v), want 1", v, err)
		}
	})
}

// sample sums the series of the named metric whose labels include match:
// counter and gauge values, histogram sample counts. It also returns how
// many series matched.
func sample(g prometheus.Gatherer, name string, match map[string]string) (float64, int, error) {
	families, err := g.Gather()
	if err != nil {
		return 0, 0, err
	}
	var sum float64
	var series int
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	series:
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range match {
				if got, ok := labels[k]; !ok || got != v {
					continue series
				}
			}
			series++
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Histogram != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum, series, nil
}

// eventuallyEqual waits until value returns want.
func eventuallyEqual(t *testing.T, what string, value func() (float64, error), want float64) {
	t.Helper()
	eventually(t, what, 30*time.Second, func() error {
		got, err := value()
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%v, want %v", got, want)
		}
		return nil
	})
}
