package status

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate/policycache"
)

// fixedCache is a policy cache that serves one snapshot.
type fixedCache struct {
	snap   *policycache.Snapshot
	synced bool
}

func (f fixedCache) Snapshot() *policycache.Snapshot { return f.snap }
func (f fixedCache) Synced() bool                    { return f.synced }

func TestReconcileWritesOnlyChanges(t *testing.T) {
	valid := load(t, "require-labels.yaml").(*kyvernov1.ClusterPolicy)
	invalid := load(t, "bad-anchor.yaml").(*kyvernov1.ClusterPolicy)
	team := load(t, "team-policy.yaml").(*kyvernov1.Policy)
	pending := load(t, "fail-open.yaml").(*kyvernov1.ClusterPolicy) // not compiled yet

	sch := runtime.NewScheme()
	if err := kyvernov1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	if err := policiesv1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	writes := map[string]int{}
	cl := fake.NewClientBuilder().WithScheme(sch).
		WithObjects(valid.DeepCopy(), invalid.DeepCopy(), team.DeepCopy(), pending.DeepCopy()).
		WithStatusSubresource(&kyvernov1.ClusterPolicy{}, &kyvernov1.Policy{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				writes[obj.GetName()]++
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
			SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
				t.Error("status written with an update; want a patch")
				return nil
			},
		}).Build()
	// The fake client starts generations at 0; the snapshot compiles what
	// the client holds.
	var objs []kyvernov1.PolicyInterface
	for _, key := range []client.ObjectKey{{Name: valid.Name}, {Name: invalid.Name}} {
		var p kyvernov1.ClusterPolicy
		if err := cl.Get(context.Background(), key, &p); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &p)
	}
	var tp kyvernov1.Policy
	if err := cl.Get(context.Background(), client.ObjectKeyFromObject(team), &tp); err != nil {
		t.Fatal(err)
	}
	objs = append(objs, &tp)
	cache := &fixedCache{snap: snapshot(t, objs...)}
	c := New(Options{Client: cl, Policies: cache})
	ctx := context.Background()

	if err := c.Reconcile(ctx); err != nil || len(writes) != 0 {
		t.Fatalf("before the first snapshot: err %v, writes %v", err, writes)
	}
	cache.synced = true
	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{valid.Name: 1, invalid.Name: 1, team.Name: 1}
	if len(writes) != len(want) || writes[valid.Name] != 1 || writes[invalid.Name] != 1 || writes[team.Name] != 1 {
		t.Fatalf("writes %v, want %v (the policy the snapshot lacks waits)", writes, want)
	}
	check := func(p kyvernov1.StatusHolder, key client.ObjectKey, ready bool) {
		t.Helper()
		if err := cl.Get(ctx, key, p.(client.Object)); err != nil {
			t.Fatal(err)
		}
		c := meta.FindStatusCondition(p.GetStatus().Conditions, kyvernov1.PolicyConditionReady)
		if c == nil || meta.IsStatusConditionTrue(p.GetStatus().Conditions, kyvernov1.PolicyConditionReady) != ready {
			t.Errorf("%s: Ready condition %+v, want ready=%v", key, c, ready)
		}
	}
	check(&kyvernov1.ClusterPolicy{}, client.ObjectKey{Name: valid.Name}, true)
	check(&kyvernov1.ClusterPolicy{}, client.ObjectKey{Name: invalid.Name}, false)
	check(&kyvernov1.Policy{}, client.ObjectKeyFromObject(team), true)
	var p kyvernov1.ClusterPolicy
	if err := cl.Get(ctx, client.ObjectKey{Name: pending.Name}, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Status.Conditions) != 0 {
		t.Errorf("a policy the snapshot lacks got a status: %+v", p.Status.Conditions)
	}

	// Nothing changed: nothing is written.
	for range 3 {
		if err := c.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if writes[valid.Name] != 1 || writes[invalid.Name] != 1 || writes[team.Name] != 1 {
		t.Errorf("unchanged statuses written again: %v", writes)
	}
}

// TestReadyWaitsForWebhookConfiguration: a served policy is written Ready
// only once Configured says the webhook configurations were built from
// its generation; a policy that does not compile, or one never served at
// admission (spec.admission false: no webhook to wait for), is written at
// once.
func TestReadyWaitsForWebhookConfiguration(t *testing.T) {
	valid := load(t, "require-labels.yaml").(*kyvernov1.ClusterPolicy)
	invalid := load(t, "bad-anchor.yaml").(*kyvernov1.ClusterPolicy)
	backgroundOnly := load(t, "background-only.yaml").(*kyvernov1.ClusterPolicy)
	sch := runtime.NewScheme()
	if err := kyvernov1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	if err := policiesv1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(sch).WithObjects(valid.DeepCopy(), invalid.DeepCopy(), backgroundOnly.DeepCopy()).
		WithStatusSubresource(&kyvernov1.ClusterPolicy{}).Build()
	ctx := context.Background()
	var objs []kyvernov1.PolicyInterface
	// The cache compiles every installed policy, admission or not.
	for _, name := range []string{valid.Name, invalid.Name, backgroundOnly.Name} {
		var p kyvernov1.ClusterPolicy
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &p)
	}
	configured := false
	c := New(Options{Client: cl, Policies: &fixedCache{snap: snapshot(t, objs...), synced: true},
		Configured: func(kyvernov1.PolicyInterface) bool { return configured }})
	conditions := func(name string) []metav1.Condition {
		t.Helper()
		var p kyvernov1.ClusterPolicy
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
			t.Fatal(err)
		}
		return p.Status.Conditions
	}

	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := conditions(valid.Name); len(got) != 0 {
		t.Errorf("%s written before its webhooks were configured: %+v", valid.Name, got)
	}
	if got := meta.FindStatusCondition(conditions(invalid.Name), kyvernov1.PolicyConditionReady); got == nil || got.Status != metav1.ConditionFalse {
		t.Errorf("%s: Ready condition %+v, want False at once", invalid.Name, got)
	}
	if !meta.IsStatusConditionTrue(conditions(backgroundOnly.Name), kyvernov1.PolicyConditionReady) {
		t.Errorf("%s (admission: false): Ready condition %+v, want True at once", backgroundOnly.Name, conditions(backgroundOnly.Name))
	}

	configured = true
	if err := c.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(conditions(valid.Name), kyvernov1.PolicyConditionReady) {
		t.Errorf("%s: Ready condition %+v once configured, want True", valid.Name, conditions(valid.Name))
	}
}
