package leadership

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/leadership/leadershiptest"
)

// countingRunnable is leader-only work that counts its terms and how many
// of them ran at once.
type countingRunnable struct {
	starts, active, maxActive atomic.Int32
}

func (r *countingRunnable) NeedLeaderElection() bool { return true }

func (r *countingRunnable) Start(ctx context.Context) error {
	r.starts.Add(1)
	n := r.active.Add(1)
	for {
		m := r.maxActive.Load()
		if n <= m || r.maxActive.CompareAndSwap(m, n) {
			break
		}
	}
	<-ctx.Done()
	r.active.Add(-1)
	return nil
}

// A Lease taken by another holder stops the group's work, not the
// process: the manager goes on running, and once the Lease is free again
// the group leads again, with its runnables started anew and its
// controller-runtime controller built anew (a controller starts only
// once). Nothing runs twice at once, and what changed meanwhile is
// reconciled by the new term.
func TestGroupLeadsAgainAfterALostLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	const ns, leaseName = "charter", "charter-group"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	realMgr, err := ctrl.NewManager(cp.RESTConfig(), ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	group := NewGroup(cp.RESTConfig(), LeaseOptions{Enabled: true, Namespace: ns, Name: leaseName, RetryPeriod: 300 * time.Millisecond, Log: logr.Discard()})
	if err := realMgr.Add(group); err != nil {
		t.Fatal(err)
	}
	mgr := group.Manager(realMgr)

	work := &countingRunnable{}
	if err := mgr.Add(work); err != nil {
		t.Fatal(err)
	}
	// A controller built once would not start again: refused.
	err = ctrl.NewControllerManagedBy(mgr).Named("built-once").For(&corev1.ConfigMap{}).
		Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }))
	if err == nil || !strings.Contains(err.Error(), "PerTerm") {
		t.Errorf("a controller added to the group's manager: %v, want a refusal naming PerTerm", err)
	}
	var builds atomic.Int32
	var mu sync.Mutex
	reconciled := map[string]time.Time{}
	perTerm, err := PerTerm(mgr, func(m ctrl.Manager) error {
		builds.Add(1)
		return ctrl.NewControllerManagedBy(m).Named("configmaps").For(&corev1.ConfigMap{}).
			Complete(reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
				mu.Lock()
				defer mu.Unlock()
				if _, ok := reconciled[req.Name]; !ok {
					reconciled[req.Name] = time.Now()
				}
				return reconcile.Result{}, nil
			}))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(perTerm); err != nil {
		t.Fatal(err)
	}
	reconciledAt := func(name string) (time.Time, bool) {
		mu.Lock()
		defer mu.Unlock()
		at, ok := reconciled[name]
		return at, ok
	}

	mgrCtx, stopMgr := context.WithCancel(ctx)
	exited := make(chan error, 1)
	go func() { exited <- realMgr.Start(mgrCtx) }()
	stillRunning := func(when string) {
		t.Helper()
		select {
		case err := <-exited:
			t.Fatalf("%s: the manager exited: %v", when, err)
		default:
		}
	}

	createConfigMap := func(name string) {
		t.Helper()
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createConfigMap("before")
	waitUntil(t, "the first term", func() bool { return work.starts.Load() == 1 })
	waitUntil(t, "the first term's controller", func() bool { _, ok := reconciledAt("before"); return ok })

	// Another holder takes the Lease, for an hour.
	leadershiptest.TakeLease(ctx, t, cs, ns, leaseName)
	waitUntil(t, "the first term to end", func() bool { return work.active.Load() == 0 })
	stillRunning("the Lease lost")
	createConfigMap("while-lost")

	// The thief lets go: the group campaigns, leads and works again.
	released := time.Now()
	if err := cs.CoordinationV1().Leases(ns).Delete(ctx, leaseName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the second term", func() bool { return work.starts.Load() == 2 })
	waitUntil(t, "the second term's controller", func() bool { _, ok := reconciledAt("while-lost"); return ok })
	stillRunning("leading again")
	if at, _ := reconciledAt("while-lost"); at.Before(released) {
		t.Errorf("a ConfigMap created while another held the Lease was reconciled %s before it was free", released.Sub(at))
	}
	if n := builds.Load(); n != 2 {
		t.Errorf("the controller was built %d times for 2 terms", n)
	}
	if n := work.maxActive.Load(); n != 1 {
		t.Errorf("%d terms ran at once", n)
	}
	lease, err := cs.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == leadershiptest.Thief {
		t.Errorf("the Lease after the second election: %+v, %v", lease, err)
	}

	stopMgr()
	if err := <-exited; err != nil {
		t.Errorf("manager: %v", err)
	}
	if n := work.active.Load(); n != 0 {
		t.Errorf("%d terms still running after the manager stopped", n)
	}
}
