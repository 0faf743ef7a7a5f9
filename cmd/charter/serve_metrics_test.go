package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/webhook/metrics"
)

// `charter serve --controllers=reports,background` records the background
// scans' policy results, and the GeneratingPolicy runs of the background
// controller, in controller-runtime's registry, which the manager's
// metrics endpoint serves: both controllers get the process's recorder
// even without admission.
func TestServeReportsRecordsBackgroundScanMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.WithCRDs(crdDir(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	cl := devTestClient(t, cp.RESTConfig())

	// The dev fixture's policy is admission-only; scans need background.
	doc := strings.Replace(requireTeamPolicy("Audit"), "background: false", "background: true", 1)
	var policy kyvernov1.ClusterPolicy
	if err := yaml.Unmarshal([]byte(doc), &policy); err != nil || !policy.Spec.BackgroundProcessingEnabled() {
		t.Fatalf("policy fixture: %v (background %v)", err, policy.Spec.BackgroundProcessingEnabled())
	}
	if err := cl.Create(ctx, &policy); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, teamlessPod("scanned")); err != nil {
		t.Fatal(err)
	}
	var gpol policiesv1.GeneratingPolicy
	if err := yaml.UnmarshalStrict([]byte(defaultConfigMapGeneratingPolicy), &gpol); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, &gpol); err != nil {
		t.Fatal(err)
	}

	o := serveOptions{
		controllers: []string{controllerReports, controllerBackground},
		namespace:   "default",
		metricsAddr: "0",
		healthAddr:  "0",
		retryPeriod: 2 * time.Second,
		repeatable:  true,
	}
	startServeManager(ctx, t, cp.RESTConfig(), o)

	want := map[string]string{
		"policy_name": "require-team", "rule_name": "check-team", "rule_result": "fail",
		"resource_kind": "Pod", "resource_namespace": "default", "resource_request_operation": "create",
		"rule_execution_cause": metrics.CauseBackground, "dry_run": "false",
	}
	waitForSeries(t, metrics.PolicyResultsTotal, want)
	// generateExisting ran the GeneratingPolicy for namespace default.
	waitForSeries(t, metrics.GeneratingPolicyResultsTotal, map[string]string{
		"policy_name": "default-config", "resource_kind": "Namespace", "resource_request_operation": "create",
		"execution_cause": metrics.CauseBackground, "result": "pass",
	})
}

// defaultConfigMapGeneratingPolicy generates a ConfigMap in namespace
// default, which exists already (generateExisting).
const defaultConfigMapGeneratingPolicy = `
apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata:
  name: default-config
spec:
  evaluation:
    generateExisting:
      enabled: true
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [namespaces], resourceNames: [default]}
  generate:
  - expression: >-
      generator.Apply("default", [{"apiVersion": dyn("v1"), "kind": dyn("ConfigMap"), "metadata": dyn({"name": "generated"})}])
`

// waitForSeries waits up to 45s for a series of the family with the
// labels in controller-runtime's registry.
func waitForSeries(t *testing.T, family string, labels map[string]string) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		found, err := registryHas(family, labels)
		if err != nil {
			t.Fatal(err)
		}
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s series with %v within 45s", family, labels)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// registryHas reports whether controller-runtime's registry holds a
// series of the family with at least the given labels and a positive
// value.
func registryHas(family string, labels map[string]string) (bool, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return false, fmt.Errorf("gathering: %w", err)
	}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			matched := 0
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok {
					if v != l.GetValue() {
						continue series
					}
					matched++
				}
			}
			if matched == len(labels) && m.GetCounter().GetValue() > 0 {
				return true, nil
			}
		}
	}
	return false, nil
}

// startServeManager runs the controller manager charter serve builds from
// o until the test ends, and fails the test if it exits with an error.
func startServeManager(ctx context.Context, t *testing.T, cfg *rest.Config, o serveOptions) {
	t.Helper()
	mgr, _, err := newControllerManager(cfg, o, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	mgrCtx, stop := context.WithCancel(ctx)
	exited := make(chan error, 1)
	go func() { exited <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-exited; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}
