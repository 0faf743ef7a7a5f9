package policycache

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/policyid"
)

func TestSpecChanged(t *testing.T) {
	base := clusterPolicy(1)
	withGeneration := func(p *kyvernov1.ClusterPolicy, gen int64) *kyvernov1.ClusterPolicy {
		p = p.DeepCopy()
		p.Generation = gen
		return p
	}
	statusWritten := base.DeepCopy()
	ready := true
	statusWritten.Status.Ready = &ready
	edited := withGeneration(base, 2)
	edited.Spec.Rules[0].Validation.Message = "edited"
	deleting := withGeneration(base, 2)
	deleting.DeletionTimestamp = &metav1.Time{}
	relabelled := base.DeepCopy()
	relabelled.Labels = map[string]string{"team": "a"}

	tests := []struct {
		name     string
		old, new kyvernov1.PolicyInterface
		want     bool
	}{
		{"a status write keeps the generation", base, statusWritten, false},
		{"a label edit keeps the generation", base, relabelled, false},
		{"a spec edit bumps it", base, edited, true},
		{"a bumped generation with the same spec (deletion timestamp)", base, deleting, false},
		{"without generations (not from an API server), specs are compared", withGeneration(base, 0), withGeneration(edited, 0), true},
		{"without generations and the same spec", withGeneration(base, 0), withGeneration(statusWritten, 0), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := specChanged(tc.old, tc.new); got != tc.want {
				t.Errorf("specChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

// changeLog records the policy changes a Cache reports.
type changeLog struct {
	mu  sync.Mutex
	got []string
}

func (l *changeLog) record(p kyvernov1.PolicyInterface, change PolicyChange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, string(change)+" "+p.GetKind()+" "+policyid.Key(p))
}

func (l *changeLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.got
	l.got = nil
	return out
}

// TestCacheReportsPolicyChanges fires informer events at a running Cache
// and checks which reach OnPolicyChange listeners: every event of a
// ClusterPolicy or Policy, updates only when their spec changed, nothing
// of exceptions.
func TestCacheReportsPolicyChanges(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cpol := clusterPolicy(1)
	nspol := &kyvernov1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: "team-a", Generation: 1}, Spec: *cpol.Spec.DeepCopy()}
	ex := exceptionFor("skip", cpol.Name, "r")
	cluster := newFakeCluster(t)
	cache := New(cluster, logr.Discard())
	var log changeLog
	cache.OnPolicyChange(log.record)
	done := make(chan error, 1)
	go func() { done <- cache.Start(ctx) }()
	waitFor(t, "the first snapshot", cache.Synced)

	cpols := cluster.informer(t, &kyvernov1.ClusterPolicy{})
	pols := cluster.informer(t, &kyvernov1.Policy{})
	exs := cluster.informer(t, &kyvernov2.PolicyException{})
	statusWritten := cpol.DeepCopy()
	statusWritten.Status.Conditions = []metav1.Condition{{Type: kyvernov1.PolicyConditionReady, Status: metav1.ConditionTrue}}
	edited := statusWritten.DeepCopy()
	edited.Generation++
	edited.Spec.Rules[0].Validation.Message = "edited"

	steps := []struct {
		name string
		fire func()
		want []string
	}{
		{"a ClusterPolicy added", func() { cpols.Add(cpol) }, []string{"created ClusterPolicy p-001"}},
		{"a Policy added", func() { pols.Add(nspol) }, []string{"created Policy team-a/local"}},
		{"an exception added", func() { exs.Add(ex) }, nil},
		{"a status write", func() { cpols.Update(cpol, statusWritten) }, nil},
		{"a spec edit", func() { cpols.Update(statusWritten, edited) }, []string{"updated ClusterPolicy p-001"}},
		{"an exception edited", func() { exs.Update(ex, ex) }, nil},
		{"a Policy deleted", func() { pols.Delete(nspol) }, []string{"deleted Policy team-a/local"}},
		{"a ClusterPolicy deleted", func() { cpols.Delete(edited) }, []string{"deleted ClusterPolicy p-001"}},
	}
	for _, step := range steps {
		step.fire()
		// The fake informers call handlers synchronously.
		if got := log.take(); !reflect.DeepEqual(got, step.want) {
			t.Errorf("%s: changes %q, want %q", step.name, got, step.want)
		}
	}

	// A deletion the informer missed arrives as a tombstone.
	cache.policyChanged(toolscache.DeletedFinalStateUnknown{Key: "p-001", Obj: cpol}, PolicyDeleted)
	cache.policyChanged(toolscache.DeletedFinalStateUnknown{Key: "gone"}, PolicyDeleted)
	if got, want := log.take(), []string{"deleted ClusterPolicy p-001"}; !reflect.DeepEqual(got, want) {
		t.Errorf("tombstones: changes %q, want %q", got, want)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v", err)
	}
}
