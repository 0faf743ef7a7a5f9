package reports

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/enginetest"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// TestScanKeepsAnEqualAdmissionResult: a Pod's admission result is
// written into its report; the background scan then finds the same
// verdict and leaves the report as it is (metadata.generation 1, the
// admission's process), as Kyverno writes it once: its e2e tests
// (validating-policies/report/message-exp, with-exception*) assert
// generation 1. Before, the scan rewrote it to say "background scan" with
// a new timestamp.
func TestScanKeepsAnEqualAdmissionResult(t *testing.T) {
	e := startEnv(t)
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "reports-test"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.apply("disallow-latest.yaml")

	// An admission replica alone first: its result is the report's first
	// write.
	queue := NewAdmissionQueue(10)
	mgr, err := ctrl.NewManager(e.cfg, ctrl.Options{Scheme: e.scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := SetupAdmissionWriter(mgr, e.withClusterState(mgr, Options{Admission: queue})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	pod := e.apply("pod.yaml")
	if !queue.Enqueue(Resource{APIVersion: "v1", Kind: "Pod", Namespace: "reports-test", Name: "web", UID: pod.GetUID()},
		evaluateAdmissionOf(t, pod, "disallow-latest.yaml")) {
		t.Fatal("queue full")
	}
	first := e.wantResults("the admission result", "reports-test", string(pod.GetUID()), "disallow-latest/no-latest=fail")
	if g := first.GetGeneration(); g != 1 {
		t.Fatalf("the admission's report has generation %d, want 1", g)
	}

	// Then the reports controller: its first scan, and a full rescan
	// once it is synced, find the same verdict.
	c, _ := e.startController(Options{})
	if err := c.FullRescan(e.ctx); err != nil {
		t.Fatal(err)
	}
	_, after, err := e.results("reports-test", string(pod.GetUID()))
	if err != nil || after == nil {
		t.Fatalf("the report after the scan: %v", err)
	}
	parsed, err := report.Parse(after)
	if err != nil {
		t.Fatal(err)
	}
	if g := after.GetGeneration(); g != 1 || len(parsed.Results) != 1 || parsed.Results[0].Properties["process"] != report.ProcessAdmission {
		t.Errorf("after the scan: generation %d, results %+v; want generation 1 and the admission's result kept", g, parsed.Results)
	}
}

// evaluateAdmissionOf evaluates the policy of testdata file on pod as
// the admission webhook does.
func evaluateAdmissionOf(t *testing.T, pod *unstructured.Unstructured, file string) []engine.PolicyResponse {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var p kyvernov1.ClusterPolicy
	if err := yaml.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	set := enginetest.Set(t, &p)
	return set.Validate(context.Background(), engine.RequestForObject(pod)).Policies
}
