package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate/loaders"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/imagetest"
	"github.com/charter-dev/charter/webhook/metrics"
)

// `charter serve` hands its controllers the image data loader: a
// background scan of a ClusterPolicy whose imageRegistry context entry
// reads a loopback registry passes for the Pod whose tag names the
// release digest (without the loader the entry would end in error).
func TestServeReadsImageDataFromTheRegistry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reg := imagetest.NewRegistry(t)
	release := reg.Push(t, "app", "release")
	cp, err := controlplane.Start(ctx, controlplane.WithCRDs(crdDir(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	cl := devTestClient(t, cp.RESTConfig())

	var policy kyvernov1.ClusterPolicy
	if err := yaml.UnmarshalStrict([]byte(fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: release-digest}
spec:
  background: true
  rules:
  - name: digest
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - name: imageData
      imageRegistry: {reference: "{{ request.object.spec.containers[0].image }}"}
    validate:
      message: not the release image
      deny:
        conditions:
          any:
          - {key: "{{ imageData.digest }}", operator: NotEquals, value: %q}
`, release.Digest)), &policy); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, &policy); err != nil {
		t.Fatal(err)
	}
	pod := teamlessPod("release")
	pod.Spec.Containers[0].Image = release.Ref
	if err := cl.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}

	o := serveOptions{
		controllers: []string{controllerReports},
		namespace:   "default",
		metricsAddr: "0",
		healthAddr:  "0",
		retryPeriod: 2 * time.Second,
		repeatable:  true,
		images:      defaultImageVerifyOptions(),
		// The registry listens on loopback, which the egress guard
		// refuses unless let through (--egress-allow).
		httpLimits: loaders.HTTPLimits{AllowedAddresses: []string{reg.Host}},
	}
	startServeManager(ctx, t, cp.RESTConfig(), o)

	labels := map[string]string{"policy_name": "release-digest", "rule_name": "digest", "resource_kind": "Pod",
		"rule_execution_cause": metrics.CauseBackground}
	deadline := time.Now().Add(45 * time.Second)
	for {
		labels["rule_result"] = "pass"
		passed, err := registryHas(metrics.PolicyResultsTotal, labels)
		if err != nil {
			t.Fatal(err)
		}
		if passed {
			return
		}
		labels["rule_result"] = "error"
		if errored, _ := registryHas(metrics.PolicyResultsTotal, labels); errored {
			t.Fatal("the scan's result is an error: the image data loader is not wired")
		}
		if time.Now().After(deadline) {
			t.Fatalf("no passing background result of release-digest within 45s")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
