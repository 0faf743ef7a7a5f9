package clusterstate

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/go-logr/logr"

	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
)

// TestExceptionEventsFromTheLeaderOnly runs three charter processes on one
// API server, as a deployment does: two admission replicas electing a
// leader (built WithExceptionEvents) and a process of another controller
// (without it). An exception from an untrusted namespace gets one
// ExceptionIgnored event, from the leader, not one per process; when the
// leader goes, the replica that takes over tells of it once more (it
// cannot know the old leader did), and a new generation of the exception
// is again told once.
func TestExceptionEventsFromTheLeaderOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := controlplanetest.Start(ctx, t)
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	for _, ns := range []string{"charter", "platform", "team-b"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	type process struct {
		mgr   manager.Manager
		state *State
		stop  context.CancelFunc
		done  chan error
	}
	lease, renew, retry := 2*time.Second, 1500*time.Millisecond, 200*time.Millisecond
	start := func(elect bool, opts ...Option) *process {
		o := ctrl.Options{}
		if elect {
			o = ctrl.Options{LeaderElection: true, LeaderElectionID: "charter-admission", LeaderElectionNamespace: "charter",
				LeaderElectionReleaseOnCancel: true, LeaseDuration: &lease, RenewDeadline: &renew, RetryPeriod: &retry}
		}
		p := &process{mgr: newManager(t, cp, o), done: make(chan error, 1)}
		var err error
		if p.state, err = New(p.mgr, logr.Discard(), append(opts, WithExceptionNamespaces(trustPlatform(t)))...); err != nil {
			t.Fatal(err)
		}
		var pctx context.Context
		pctx, p.stop = context.WithCancel(ctx)
		go func() { p.done <- p.mgr.Start(pctx) }()
		t.Cleanup(func() { p.stop(); <-p.done })
		return p
	}
	first := start(true, WithExceptionEvents())
	select {
	case <-first.mgr.Elected():
	case <-ctx.Done():
		t.Fatal("the first admission replica never led")
	}
	second := start(true, WithExceptionEvents())
	other := start(false)
	for _, p := range []*process{first, second, other} {
		if !p.state.Policies.WaitForSync(ctx) {
			t.Fatal("a policy cache did not sync")
		}
	}

	cl, err := client.New(cp.RESTConfig(), client.Options{Scheme: first.mgr.GetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ex := podException("team-b", "let-me-in", "team-b")
	if err := cl.Create(ctx, ex); err != nil {
		t.Fatal(err)
	}
	ignoredEvents := func() int {
		events, err := kube.EventsV1().Events("team-b").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range events.Items {
			if ev.Regarding.Name == ex.Name && ev.Reason == ReasonExceptionIgnored {
				n++
				if ev.Series != nil {
					n += int(ev.Series.Count) - 1
				}
			}
		}
		return n
	}
	waitEvents := func(what string, want int) {
		t.Helper()
		eventually(t, what, func() error {
			if n := ignoredEvents(); n != want {
				return fmt.Errorf("%d ExceptionIgnored events, want %d", n, want)
			}
			return nil
		})
	}
	// Each process's cache has left the exception out before the
	// leader's event is counted: a process that would emit has emitted.
	for _, p := range []*process{first, second, other} {
		eventually(t, "the exception left out", func() error {
			if len(p.state.Policies.Installed().Exceptions) != 0 {
				return fmt.Errorf("installed")
			}
			return nil
		})
	}
	waitEvents("the leader's event", 1)
	time.Sleep(time.Second) // the other processes' events, were there any, are written by now
	if n := ignoredEvents(); n != 1 {
		t.Fatalf("%d ExceptionIgnored events from three processes, want 1 (the leader's)", n)
	}

	first.stop()
	if err := <-first.done; err != nil {
		t.Fatalf("first replica: %v", err)
	}
	first.done <- nil // for the cleanup
	select {
	case <-second.mgr.Elected():
	case <-ctx.Done():
		t.Fatal("the second admission replica never took over")
	}
	waitEvents("the new leader's catch-up event", 2)

	if err := cl.Get(ctx, client.ObjectKeyFromObject(ex), ex); err != nil {
		t.Fatal(err)
	}
	ex.Spec.Match.Any[0].ResourceDescription.Names = []string{"web"}
	if err := cl.Update(ctx, ex); err != nil {
		t.Fatal(err)
	}
	waitEvents("one event for the exception's new generation", 3)
	time.Sleep(time.Second)
	if n := ignoredEvents(); n != 3 {
		t.Fatalf("%d ExceptionIgnored events after a new generation, want 3", n)
	}
}
