package reports

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/charter-dev/charter/engine"
)

// TestAdmissionWriterBoundsWaitingResources: the results of a request
// admitted but never stored (another webhook denied it) wait for their
// resource, retried every 2 s for 2 minutes. With the writer bounded to
// one waiting resource, the next resource's results are dropped at once:
// counted (OnDrop, Dropped) and logged, never queued without end, and the
// webhook's Enqueue is not held up.
func TestAdmissionWriterBoundsWaitingResources(t *testing.T) {
	e := startEnv(t)
	pod, responses := e.latestPodAdmitted()

	queue := NewAdmissionQueue(10)
	var drops atomic.Int64
	queue.OnDrop(func() { drops.Add(1) })
	var (
		mu    sync.Mutex
		lines []string
	)
	log := funcr.New(func(_, args string) { mu.Lock(); lines = append(lines, args); mu.Unlock() }, funcr.Options{})
	mgr, err := ctrl.NewManager(e.cfg, ctrl.Options{Scheme: e.scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := SetupAdmissionWriter(mgr, e.withClusterState(mgr, Options{Admission: queue, MaxPendingResources: 1, Logger: log})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	ghost := Resource{APIVersion: "v1", Kind: "Pod", Namespace: "reports-test", Name: "ghost", UID: types.UID("never-stored")}
	web := Resource{APIVersion: "v1", Kind: "Pod", Namespace: "reports-test", Name: "web", UID: pod.GetUID()}
	if !queue.Enqueue(ghost, responses) || !queue.Enqueue(web, responses) {
		t.Fatal("a queue of 10 refused the second admission")
	}
	// The writer drains the queue in order once its policy cache synced:
	// the ghost takes the one place, web finds none. No deadline of our
	// own: the test's context bounds the wait.
	for drops.Load() == 0 {
		select {
		case <-e.ctx.Done():
			t.Fatal("no drop counted")
		case <-time.After(50 * time.Millisecond):
		}
	}
	if got := queue.Dropped(); got != 1 {
		t.Errorf("Dropped() = %d, want 1", got)
	}
	mu.Lock()
	logged := strings.Join(lines, "\n")
	mu.Unlock()
	if !strings.Contains(logged, "admission results dropped") || !strings.Contains(logged, "reports-test/web") || !strings.Contains(logged, "1 resources wait for their reports") {
		t.Errorf("log lacks the drop of web and why:\n%s", logged)
	}
	if results, _, err := e.results("reports-test", string(pod.GetUID())); err != nil || results != nil {
		t.Errorf("web's report: %v, %v; want none (its results were dropped)", results, err)
	}
}

// latestPodAdmitted makes namespace reports-test, policy disallow-latest
// and Pod web (nginx:latest) in it, and returns the Pod and the responses
// its admission gets from the policy, as the webhook hands them to the
// admission writer's queue.
func (e *env) latestPodAdmitted() (*unstructured.Unstructured, []engine.PolicyResponse) {
	e.t.Helper()
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "reports-test"}}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.apply("disallow-latest.yaml")
	pod := e.apply("pod.yaml")
	return pod, evaluateAdmissionOf(e.t, pod, "disallow-latest.yaml")
}

// TestAdmissionQueueFullDropsWithoutBlocking: a full queue refuses at once,
// counts the drop and calls OnDrop.
func TestAdmissionQueueFullDropsWithoutBlocking(t *testing.T) {
	q := NewAdmissionQueue(1)
	var drops atomic.Int64
	q.OnDrop(func() { drops.Add(1) })
	r := Resource{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "a", UID: "uid-a"}
	responses := []engine.PolicyResponse{{}}
	if !q.Enqueue(r, responses) {
		t.Fatal("an empty queue refused")
	}
	if q.Enqueue(r, responses) {
		t.Fatal("a full queue accepted")
	}
	if q.Dropped() != 1 || drops.Load() != 1 {
		t.Fatalf("Dropped() = %d, OnDrop calls %d; want 1 and 1", q.Dropped(), drops.Load())
	}
}

// TestRetryAfterGrows: 2 s, then twice the last wait, up to 8 s.
func TestRetryAfterGrows(t *testing.T) {
	for attempts, want := range map[int]time.Duration{0: 2 * time.Second, 1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 4: 8 * time.Second, 50: 8 * time.Second} {
		if got := retryAfter(attempts); got != want {
			t.Errorf("retryAfter(%d) = %s, want %s", attempts, got, want)
		}
	}
}
