package policycache

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// installedLog records the Installed a Cache hands its listeners.
type installedLog struct {
	mu  sync.Mutex
	got []*Installed
}

func (l *installedLog) add(in *Installed) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, in)
}

func (l *installedLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.got)
}

// TestCacheInstalledNotifiesEveryController pins what the controllers
// that subscribe to the cache (reports, background) see: every installed
// policy, admission or not, once synced; a notification for a policy
// that admission does not serve (so no new admission snapshot); none
// for a status write.
func TestCacheInstalledNotifiesEveryController(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	no := false
	backgroundOnly := policy("background-only", func(s *kyvernov1.Spec) { s.Admission = &no })
	backgroundOnly.UID, backgroundOnly.Generation = types.UID("uid-bg"), 1
	cluster := newFakeCluster(t, clusterPolicy(1), backgroundOnly)
	cache := New(cluster, logr.Discard())
	cache.debounce, cache.maxDelay = 20*time.Millisecond, time.Second
	var log installedLog
	cache.OnInstalledChange(log.add)
	var published publications
	cache.OnChange(published.add)

	done := make(chan error, 1)
	go func() { done <- cache.Start(ctx) }()
	waitCtx, stopWait := context.WithTimeout(ctx, 10*time.Second)
	defer stopWait()
	if !cache.WaitForSync(waitCtx) {
		t.Fatal("WaitForSync: the cache did not sync")
	}
	in := cache.Installed()
	if len(in.Policies) != 2 || in.Generation != 1 {
		t.Fatalf("Installed after sync: %d policies, generation %d; want both policies, generation 1", len(in.Policies), in.Generation)
	}
	if got := len(cache.Snapshot().Policies()); got != 1 {
		t.Errorf("the admission snapshot serves %d policies, want 1 (background-only is not served at admission)", got)
	}
	if log.count() != 1 {
		t.Errorf("the first sync notified %d times, want once", log.count())
	}

	policies := cluster.informer(t, &kyvernov1.ClusterPolicy{})
	edited := backgroundOnly.DeepCopy()
	edited.Spec.Rules[0].Validation.Message = "edited"
	edited.Generation++
	cluster.put(edited)
	snapshots := published.count()
	policies.Update(backgroundOnly, edited)
	waitFor(t, "the edit's notification", func() bool { return log.count() == 2 })
	if got := cache.Installed(); got.Generation != 2 || got.Policies[0].GetSpec().Rules[0].Validation.Message != "edited" {
		t.Errorf("Installed after the edit: generation %d, first policy %q; want 2 and the edited policy", got.Generation, got.Policies[0].GetName())
	}
	if n := published.count() - snapshots; n != 0 {
		t.Errorf("editing a policy admission does not serve published %d admission snapshots, want none", n)
	}

	statusWritten := edited.DeepCopy()
	ready := true
	statusWritten.Status.Ready = &ready
	cluster.put(statusWritten)
	policies.Update(edited, statusWritten)
	time.Sleep(10 * cache.debounce)
	if log.count() != 2 {
		t.Errorf("a status write notified the controllers (%d notifications, want 2)", log.count())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v", err)
	}
}
