package policycache

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
)

// fakeCluster is what the Cache reads: fake informers whose events the
// test fires, and the objects they list, kept by the test in put order.
type fakeCluster struct {
	*informertest.FakeInformers
	mu      sync.Mutex
	objects map[string]client.Object
}

// put stores an object (a copy) for List and Get; the test fires the
// informer event itself.
func (f *fakeCluster) put(obj client.Object) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := fmt.Sprintf("%T %s/%s", obj, obj.GetNamespace(), obj.GetName())
	f.objects[key] = obj.DeepCopyObject().(client.Object)
}

func (f *fakeCluster) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, obj := range f.objects {
		switch l := list.(type) {
		case *kyvernov1.ClusterPolicyList:
			if o, ok := obj.(*kyvernov1.ClusterPolicy); ok {
				l.Items = append(l.Items, *o.DeepCopy())
			}
		case *kyvernov1.PolicyList:
			if o, ok := obj.(*kyvernov1.Policy); ok {
				l.Items = append(l.Items, *o.DeepCopy())
			}
		case *kyvernov2.PolicyExceptionList:
			if o, ok := obj.(*kyvernov2.PolicyException); ok {
				l.Items = append(l.Items, *o.DeepCopy())
			}
		case *policiesv1.ValidatingPolicyList:
			if o, ok := obj.(*policiesv1.ValidatingPolicy); ok {
				l.Items = append(l.Items, *o.DeepCopy())
			}
		case *policiesv1.NamespacedValidatingPolicyList:
			if o, ok := obj.(*policiesv1.NamespacedValidatingPolicy); ok {
				l.Items = append(l.Items, *o.DeepCopy())
			}
		case *policiesv1.PolicyExceptionList:
			if o, ok := obj.(*policiesv1.PolicyException); ok {
				l.Items = append(l.Items, *o.DeepCopy())
			}
		case *policiesv1.MutatingPolicyList:
			if o, ok := obj.(*policiesv1.MutatingPolicy); ok {
				l.Items = append(l.Items, *o.DeepCopy())
			}
		case *policiesv1.NamespacedMutatingPolicyList:
			if o, ok := obj.(*policiesv1.NamespacedMutatingPolicy); ok {
				l.Items = append(l.Items, *o.DeepCopy())
			}
		case *policiesv1.GeneratingPolicyList:
			if o, ok := obj.(*policiesv1.GeneratingPolicy); ok {
				l.Items = append(l.Items, *o.DeepCopy())
			}
		case *policiesv1.NamespacedGeneratingPolicyList:
			if o, ok := obj.(*policiesv1.NamespacedGeneratingPolicy); ok {
				l.Items = append(l.Items, *o.DeepCopy())
			}
		case *policiesv1.ImageValidatingPolicyList:
			if o, ok := obj.(*policiesv1.ImageValidatingPolicy); ok {
				l.Items = append(l.Items, *o.DeepCopy())
			}
		case *policiesv1.NamespacedImageValidatingPolicyList:
			if o, ok := obj.(*policiesv1.NamespacedImageValidatingPolicy); ok {
				l.Items = append(l.Items, *o.DeepCopy())
			}
		default:
			return fmt.Errorf("fakeCluster: cannot list %T", list)
		}
	}
	return nil
}

func (f *fakeCluster) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	stored, ok := f.objects[fmt.Sprintf("%T %s/%s", obj, key.Namespace, key.Name)]
	if !ok {
		return fmt.Errorf("fakeCluster: %T %s not found", obj, key)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(stored.DeepCopyObject()).Elem())
	return nil
}

// informer returns the fake informer of a type. All four are made before
// the Cache starts, so that the informer map is only read afterwards.
func (f *fakeCluster) informer(t *testing.T, obj client.Object) *controllertest.FakeInformer {
	t.Helper()
	inf, err := f.FakeInformerFor(context.Background(), obj)
	if err != nil {
		t.Fatal(err)
	}
	return inf
}

func newFakeCluster(t *testing.T, objs ...client.Object) *fakeCluster {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kyvernov1.AddToScheme, kyvernov2.AddToScheme, policiesv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	f := &fakeCluster{
		FakeInformers: &informertest.FakeInformers{Scheme: scheme},
		objects:       map[string]client.Object{},
	}
	for _, obj := range objs {
		f.put(obj)
	}
	for _, obj := range []client.Object{&kyvernov1.ClusterPolicy{}, &kyvernov1.Policy{}, &policiesv1.ValidatingPolicy{}, &policiesv1.NamespacedValidatingPolicy{},
		&policiesv1.GeneratingPolicy{}, &policiesv1.NamespacedGeneratingPolicy{}, &policiesv1.MutatingPolicy{}, &policiesv1.NamespacedMutatingPolicy{}, &policiesv1.ImageValidatingPolicy{}, &policiesv1.NamespacedImageValidatingPolicy{}, &kyvernov2.PolicyException{}, &policiesv1.PolicyException{}, &corev1.Namespace{}} {
		f.informer(t, obj)
	}
	return f
}

func clusterPolicy(i int) *kyvernov1.ClusterPolicy {
	p := policy(fmt.Sprintf("p-%03d", i), nil)
	p.UID = types.UID(fmt.Sprintf("uid-%03d", i))
	p.Generation = 1
	return p
}

// publications records the snapshots a Cache publishes.
type publications struct {
	mu    sync.Mutex
	snaps []*Snapshot
}

func (p *publications) add(s *Snapshot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.snaps = append(p.snaps, s)
}

func (p *publications) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.snaps)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCacheRecompilesOnlyWhatChanged drives the Cache through informer
// events: a burst of 200 new policies is coalesced into a few snapshots
// and compiles each policy once; a policy edit compiles that policy; a
// Namespace label change and a status write compile and publish nothing.
// Readers evaluate the current snapshot throughout (run with -race).
func TestCacheRecompilesOnlyWhatChanged(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"env": "dev"}}}
	initial := []client.Object{ns}
	for i := range 3 {
		initial = append(initial, clusterPolicy(i))
	}
	cluster := newFakeCluster(t, initial...)
	cache := New(cluster, logr.Discard())
	cache.debounce, cache.maxDelay = 30*time.Millisecond, 2*time.Second
	b, compiled := countingBuilder()
	cache.builder = b
	var published publications
	cache.OnChange(published.add)

	done := make(chan error, 1)
	go func() { done <- cache.Start(ctx) }()
	waitFor(t, "the first snapshot", cache.Synced)
	if got := len(cache.Snapshot().Policies()); got != 3 {
		t.Fatalf("first snapshot has %d policies, want 3", got)
	}
	if got := compiled.take(); len(got) != 3 {
		t.Fatalf("first snapshot compiled %v", got)
	}

	var readers sync.WaitGroup
	stop := make(chan struct{})
	readers.Go(func() {
		pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "x", "namespace": "team-a"}}
		for {
			select {
			case <-stop:
				return
			default:
			}
			s := cache.Snapshot()
			s.Fail.Validate(context.Background(), &engine.Request{Operation: kyvernov1.Create, Object: pod, Namespace: "team-a"})
		}
	})
	defer func() { close(stop); readers.Wait() }()

	policies := cluster.informer(t, &kyvernov1.ClusterPolicy{})
	// The objects are stored first and their events then fired back to
	// back, as an informer delivers a burst.
	var burst []*kyvernov1.ClusterPolicy
	for i := 3; i < 203; i++ {
		p := clusterPolicy(i)
		cluster.put(p)
		burst = append(burst, p)
	}
	before := published.count()
	for _, p := range burst {
		policies.Add(p)
	}
	waitFor(t, "the burst's snapshot", func() bool { return len(cache.Snapshot().Policies()) == 203 })
	builds := published.count() - before
	t.Logf("a burst of 200 policies: %d snapshots published", builds)
	// One, unless the test goroutine stalled longer than the debounce
	// period in the middle of the burst on a loaded machine.
	if builds < 1 || builds > 2 {
		t.Errorf("a burst of 200 policies published %d snapshots, want 1", builds)
	}
	if got := compiled.take(); len(got) != 200 {
		t.Errorf("the burst compiled %d policies, want each of the 200 new ones once", len(got))
	}

	quiet := func(what string) {
		t.Helper()
		before := published.count()
		time.Sleep(10 * cache.debounce)
		if n := published.count() - before; n != 0 {
			t.Errorf("%s published %d snapshots, want none", what, n)
		}
		if got := compiled.take(); len(got) != 0 {
			t.Errorf("%s compiled %v, want nothing", what, got)
		}
	}

	// A Namespace label change: namespaces are read per request.
	relabelled := ns.DeepCopy()
	relabelled.Labels["env"] = "prod"
	cluster.put(relabelled)
	cluster.informer(t, &corev1.Namespace{}).Update(ns, relabelled)
	quiet("a Namespace label change")

	// A status write: same generation.
	var old kyvernov1.ClusterPolicy
	if err := cluster.Get(ctx, types.NamespacedName{Name: "p-007"}, &old); err != nil {
		t.Fatal(err)
	}
	statusWritten := old.DeepCopy()
	ready := true
	statusWritten.Status.Ready = &ready
	cluster.put(statusWritten)
	policies.Update(&old, statusWritten)
	quiet("a status write")

	// An edit of one policy's spec compiles that policy only.
	edited := statusWritten.DeepCopy()
	edited.Spec.Rules[0].Validation.Message = "edited"
	edited.Generation++
	cluster.put(edited)
	gen := cache.Snapshot().Generation
	policies.Update(statusWritten, edited)
	waitFor(t, "the edit's snapshot", func() bool { return cache.Snapshot().Generation > gen })
	if got := compiled.take(); len(got) != 1 || got[0] != "policy p-007" {
		t.Errorf("the edit compiled %v, want [policy p-007]", got)
	}
	if p, ok := cache.Snapshot().Fail.Lookup("p-007"); !ok || p.Source().GetSpec().Rules[0].Validation.Message != "edited" {
		t.Errorf("the snapshot does not serve the edited policy")
	}

	// An exception: bound without recompiling any policy.
	ex := exceptionFor("skip-7", "p-007", "r")
	cluster.put(ex)
	gen = cache.Snapshot().Generation
	cluster.informer(t, &kyvernov2.PolicyException{}).Add(ex)
	waitFor(t, "the exception's snapshot", func() bool { return cache.Snapshot().Generation > gen })
	if got := compiled.take(); len(got) != 1 || got[0] != "exception exceptions/skip-7" {
		t.Errorf("the exception compiled %v, want [exception exceptions/skip-7]", got)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v", err)
	}
}
