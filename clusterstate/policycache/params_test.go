package policycache

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/policyid"
)

// TestCacheGathersParamChanges: a change of a param object a policy may
// read is gathered by the cache as a policy change is: a burst of them
// publishes one snapshot to the subscribers, whose ParamGeneration of that
// policy counts them, compiles nothing and tells admission nothing; an
// object no paramRef selects publishes nothing.
func TestCacheGathersParamChanges(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reader := clusterPolicy(0)
	reader.Spec.Rules[0].Validation = &kyvernov1.Validation{CEL: &kyvernov1.CEL{
		Expressions: []admissionregistrationv1.Validation{{Expression: "size(object.spec.containers) <= int(params.data.max)"}},
		ParamKind:   &admissionregistrationv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
		ParamRef:    &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "default"},
	}}
	other := clusterPolicy(1)
	cluster := newFakeCluster(t, reader, other)
	cache := New(cluster, logr.Discard())
	cache.debounce, cache.maxDelay = 30*time.Millisecond, 2*time.Second
	b, compiled := countingBuilder()
	cache.builder = b
	var subscribed, admission publications
	cache.Subscribe(subscribed.add)
	cache.OnChange(admission.add)

	done := make(chan error, 1)
	go func() { done <- cache.Start(ctx) }()
	waitFor(t, "the first snapshot", cache.Synced)
	compiled.take()
	configMaps := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	configMap := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)}}
	}
	readerID, otherID := policyid.Of(reader), policyid.Of(other)

	subscribedBefore, admissionBefore := subscribed.count(), admission.count()
	for range 3 {
		cache.ParamChanged(configMaps, configMap("unrelated"))
	}
	cache.ParamChanged(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Limits"}, nil)
	time.Sleep(10 * cache.debounce)
	if n := subscribed.count() - subscribedBefore; n != 0 {
		t.Errorf("changes of objects no paramRef selects published %d snapshots, want none", n)
	}

	gen := cache.Snapshot().Generation
	for range 5 {
		cache.ParamChanged(configMaps, configMap("limits"))
	}
	waitFor(t, "the param changes' snapshot", func() bool { return cache.Snapshot().Generation > gen })
	time.Sleep(10 * cache.debounce)
	s := cache.Snapshot()
	// One, unless the test goroutine stalled longer than the debounce
	// period in the middle of the burst on a loaded machine.
	if n := subscribed.count() - subscribedBefore; n < 1 || n > 2 {
		t.Errorf("a burst of 5 param changes published %d snapshots, want 1", n)
	}
	if got := s.ParamGeneration(readerID); got != 5 {
		t.Errorf("ParamGeneration of the reading policy is %d, want 5", got)
	}
	if got := s.ParamGeneration(otherID); got != 0 {
		t.Errorf("ParamGeneration of the other policy is %d, want 0", got)
	}
	if n := admission.count() - admissionBefore; n != 0 {
		t.Errorf("param changes told admission of %d snapshots, want none", n)
	}
	if got := compiled.take(); len(got) != 0 {
		t.Errorf("param changes compiled %v, want nothing", got)
	}
	if _, ok := s.Fail.Lookup(reader.GetName()); !ok {
		t.Errorf("the snapshot of a param change does not serve the policies")
	}

	// An unknown object (nil) may be read by the policy.
	gen = s.Generation
	cache.ParamChanged(configMaps, nil)
	waitFor(t, "the unknown object's snapshot", func() bool { return cache.Snapshot().Generation > gen })
	if got := cache.Snapshot().ParamGeneration(readerID); got != 6 {
		t.Errorf("ParamGeneration after an unknown object's change is %d, want 6", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
