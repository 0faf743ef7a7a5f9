package updaterequest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
)

// TestThresholdOnRealAPIServer: the Count follows the UpdateRequests of
// charter's namespace; at the threshold, admission creates none and says
// so in a Warning event on the policy; below it, it creates them again.
func TestThresholdOnRealAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp := controlplanetest.Start(ctx, t)
	sch := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{kyvernov1.AddToScheme, kyvernov2.AddToScheme, corev1.AddToScheme} {
		if err := add(sch); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := client.New(cp.RESTConfig(), client.Options{Scheme: sch})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "charter-system"
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	md, err := metadata.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	recorder := events.NewFakeRecorder(10)
	g := NewGenerator(cl, ns, loader.Loaders{}, 0, logr.Discard())
	g.Threshold, g.Count, g.Recorder = 2, NewCount(md, ns), recorder
	go g.Count.Run(ctx)

	newUR := func(trigger string) *kyvernov2.UpdateRequest {
		ur := g.newRequest(kyvernov2.Generate, "default-deny", kyvernov1.ResourceSpec{APIVersion: "v1", Kind: "Namespace", Name: trigger}, kyvernov2.UpdateRequestSpecContext{})
		ur.Spec.RuleContext = []kyvernov2.RuleContext{{Rule: "default-deny", Trigger: ur.Spec.Resource}}
		return ur
	}
	count := func() int {
		var urs kyvernov2.UpdateRequestList
		if err := cl.List(ctx, &urs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		return len(urs.Items)
	}
	waitPending := func(want int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if n, ok := g.Count.Pending(); ok && n == want {
				return
			}
			if time.Now().After(deadline) {
				n, ok := g.Count.Pending()
				t.Fatalf("Pending() = %d, %v; want %d", n, ok, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, name := range []string{"a", "b"} {
		g.create(ctx, newUR(name))
	}
	waitPending(2)
	g.create(ctx, newUR("c"))
	if n := count(); n != 2 {
		t.Errorf("%d UpdateRequests at the threshold of 2, want 2", n)
	}
	if g.OverThreshold() != 1 {
		t.Errorf("OverThreshold() = %d, want 1", g.OverThreshold())
	}
	select {
	case ev := <-recorder.Events:
		for _, want := range []string{"Warning", ReasonThresholdReached, "at the threshold of 2", "Namespace c was not created", "--update-request-threshold"} {
			if !strings.Contains(ev, want) {
				t.Errorf("event %q lacks %q", ev, want)
			}
		}
	default:
		t.Error("no event for the UpdateRequest not created")
	}

	// Work is done: below the threshold again, the next one is created.
	if err := cl.DeleteAllOf(ctx, &kyvernov2.UpdateRequest{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	waitPending(0)
	g.create(ctx, newUR("d"))
	if n := count(); n != 1 {
		t.Errorf("%d UpdateRequests below the threshold, want 1", n)
	}
}
