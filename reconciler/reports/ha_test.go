package reports

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// replica is one `charter serve --controllers=admission,reports` process:
// a manager with leader election, the reports controller and the
// admission writer fed by the replica's own queue.
type replica struct {
	name       string
	mgr        manager.Manager
	controller *Controller
	queue      *AdmissionQueue
	writes     *writeCounter
}

func (e *env) startReplica(name string) *replica {
	e.t.Helper()
	cfg := rest.CopyConfig(e.cfg)
	r := &replica{name: name, queue: NewAdmissionQueue(10), writes: &writeCounter{}}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { r.writes.next = rt; return r.writes })
	lease, renew, retry := 4*time.Second, 3*time.Second, 500*time.Millisecond
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  e.scheme(),
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          true,
		LeaderElectionID:        "charter-reports-ha-test",
		LeaderElectionNamespace: "default",
		LeaseDuration:           &lease,
		RenewDeadline:           &renew,
		RetryPeriod:             &retry,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	r.mgr = mgr
	r.controller, err = setup(mgr, e.withClusterState(mgr, Options{Admission: r.queue}))
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("manager %s: %v", name, err)
		}
	})
	return r
}

// TestAdmissionResultsFromEveryReplica runs two replicas, as
// config/manager does: only the leader scans, yet an admission result
// queued on the other replica lands in the resource's report, and neither
// writer loses the other's results.
func TestAdmissionResultsFromEveryReplica(t *testing.T) {
	e := startEnv(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "reports-test"}}
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := e.apply("pod.yaml")
	podUID := string(pod.GetUID())
	e.apply("disallow-latest.yaml")
	e.apply("require-team.yaml")
	e.apply("admission-only.yaml")

	a, b := e.startReplica("a"), e.startReplica("b")
	var leader, follower *replica
	select {
	case <-a.mgr.Elected():
		leader, follower = a, b
	case <-b.mgr.Elected():
		leader, follower = b, a
	case <-time.After(30 * time.Second):
		t.Fatal("no replica was elected")
	}
	t.Logf("replica %s leads", leader.name)

	e.wantResults("the leader's background results", "reports-test", podUID,
		"disallow-latest/no-latest=fail", "require-team/team-label=fail")

	// The follower admits the Pod: the webhook there hands its Audit
	// results to its own queue.
	if !follower.queue.Enqueue(Resource{APIVersion: "v1", Kind: "Pod", Namespace: "reports-test", Name: "web", UID: pod.GetUID()},
		evaluateAdmission(t, pod)) {
		t.Fatal("queue full")
	}
	e.wantResults("the follower's admission result next to the leader's", "reports-test", podUID,
		"admission-only/created-by=fail", "disallow-latest/no-latest=fail", "require-team/team-label=fail")
	if follower.writes.writes.Load() == 0 {
		t.Error("the follower wrote nothing: the result did not come from its writer")
	}

	t.Run("the leader's next scan keeps the admission result", func(t *testing.T) {
		// The leader last wrote the report before the follower's merge; its
		// write after this change is found stale and merged instead.
		patch := []byte(`{"metadata":{"labels":{"team":"web"}},"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}`)
		if _, err := e.cs.CoreV1().Pods("reports-test").Patch(e.ctx, "web", "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		e.wantResults("the fixed Pod's report", "reports-test", podUID,
			"admission-only/created-by=fail", "disallow-latest/no-latest=pass", "require-team/team-label=pass")
		if leader.controller.Stats().Conflicts.Load() == 0 {
			t.Error("the leader's write was not found stale: the merge path went untested")
		}
		if err := leader.controller.FullRescan(e.ctx); err != nil {
			t.Fatal(err)
		}
		e.wantResults("the report after a full rescan", "reports-test", podUID,
			"admission-only/created-by=fail", "disallow-latest/no-latest=pass", "require-team/team-label=pass")
	})

	t.Run("a new Pod's report, whichever replica writes first", func(t *testing.T) {
		// The follower's result and the leader's first scan of the Pod race
		// to create its report: the loser's create fails and it merges.
		created, err := e.cs.CoreV1().Pods("reports-test").Create(e.ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "reports-test"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "api", Image: "nginx:latest"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		obj, err := runtimeToUnstructured(created)
		if err != nil {
			t.Fatal(err)
		}
		obj.SetAPIVersion("v1")
		obj.SetKind("Pod")
		if !follower.queue.Enqueue(Resource{APIVersion: "v1", Kind: "Pod", Namespace: "reports-test", Name: "api", UID: created.UID},
			evaluateAdmission(t, obj)) {
			t.Fatal("queue full")
		}
		e.wantResults("the new Pod's report", "reports-test", string(created.UID),
			"admission-only/created-by=fail", "disallow-latest/no-latest=fail", "require-team/team-label=fail")
	})

	t.Run("only the leader scans", func(t *testing.T) {
		if n := follower.controller.Stats().Evaluations.Load(); n != 0 {
			t.Errorf("the follower evaluated %d resources", n)
		}
		if leader.controller.Stats().Evaluations.Load() == 0 {
			t.Error("the leader evaluated nothing")
		}
	})
}

func runtimeToUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtimeConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
