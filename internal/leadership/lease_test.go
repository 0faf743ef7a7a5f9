package leadership

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/charter-dev/charter/internal/controlplane"
)

// TestOneLeaderAtATime runs two Leases of one name on one Lease: only one works
// at a time, and the other takes over when the first stops.
func TestOneLeaderAtATime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "charter"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var working, maxWorking atomic.Int32
	var worked [2]atomic.Bool
	opts := LeaseOptions{Enabled: true, Namespace: "charter", Name: "charter-test", RetryPeriod: 200 * time.Millisecond, Log: logr.Discard()}
	run := func(i int) (stop func()) {
		c, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		r := NewLease(cp.RESTConfig(), opts, func(leading context.Context) error {
			worked[i].Store(true)
			n := working.Add(1)
			if n > maxWorking.Load() {
				maxWorking.Store(n)
			}
			<-leading.Done()
			working.Add(-1)
			return nil
		})
		go func() { done <- r.Start(c) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("runnable %d: %v", i, err)
			}
		}
	}
	stopFirst := run(0)
	waitUntil(t, "the first to lead", func() bool { return worked[0].Load() })
	stopSecond := run(1)
	defer stopSecond()
	time.Sleep(2 * time.Second)
	if worked[1].Load() {
		t.Fatal("the second worked while the first held the Lease")
	}
	stopFirst()
	// The first released the Lease on the way out: the second takes over
	// within a retry period or so, not a lease duration.
	waitUntil(t, "the second to take over", func() bool { return worked[1].Load() })
	if m := maxWorking.Load(); m != 1 {
		t.Errorf("%d worked at once", m)
	}
	lease, err := cs.CoordinationV1().Leases("charter").Get(ctx, "charter-test", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("the Lease: %+v, %v", lease, err)
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
