package admission

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate/policycache"
)

// staticServed is a policy cache with a fixed snapshot.
type staticServed struct {
	synced   bool
	snapshot *policycache.Snapshot
}

func (s staticServed) Synced() bool                    { return s.synced }
func (s staticServed) Snapshot() *policycache.Snapshot { return s.snapshot }

func withReady(p kyvernov1.PolicyInterface, status metav1.ConditionStatus, observed int64) {
	p.(kyvernov1.StatusHolder).GetStatus().Conditions = []metav1.Condition{{Type: kyvernov1.PolicyConditionReady, Status: status, ObservedGeneration: observed,
		Reason: "Succeeded", LastTransitionTime: metav1.Now()}}
}

func TestPolicyInventory(t *testing.T) {
	served := policyFile(t, "require-labels.yaml")
	served.Generation = 1
	// Served at generation 1; the cluster has generation 2, which the
	// cache has not compiled yet. Its status is still about 1.
	edited := policyFile(t, "require-team.yaml")
	edited.Generation = 1
	editedNow := edited.DeepCopy()
	editedNow.Generation = 2
	withReady(editedNow, metav1.ConditionTrue, 1)
	backgroundOnly := policyFile(t, "configmaps-background-only.yaml")
	backgroundOnly.Generation = 3
	withReady(backgroundOnly, metav1.ConditionTrue, 3)
	broken := policyFile(t, "bad-anchor.yaml")
	broken.Generation = 1
	withReady(broken, metav1.ConditionFalse, 1)
	namespaced := &kyvernov1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: "team-a", Generation: 1}, Spec: *served.Spec.DeepCopy()}
	vpol := vpolTeamLabel(t, "team-label", "closed", "Fail")
	vpol.Generation = 1
	nvpol := &policiesv1.NamespacedValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-label", Namespace: "team-a", Generation: 2}, Spec: *vpol.Spec.DeepCopy()}

	snapshot, _ := policycache.NewBuilder().Build([]kyvernov1.PolicyInterface{served, edited, broken, namespaced, vpol}, nil)
	if len(snapshot.Errors) != 1 {
		t.Fatalf("want bad-anchor alone not to compile, got faults %v", snapshot.Errors)
	}
	reader := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(served, editedNow, backgroundOnly, broken, namespaced, vpol, nvpol).Build()

	states, err := policyInventory(reader, staticServed{synced: true, snapshot: snapshot})()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, s := range states {
		got[s.Policy.GetKind()+" "+objectName(s.Policy)] = s.Ready
	}
	want := map[string]bool{
		"ClusterPolicy require-labels":                 true,  // served at its generation
		"ClusterPolicy require-team":                   false, // generation 2 not served yet
		"ClusterPolicy configmaps-background-only":     true,  // not for admission; its status is about this generation
		"ClusterPolicy bad-anchor":                     false, // does not compile
		"Policy team-a/local":                          true,
		"ValidatingPolicy team-label":                  true,  // served
		"NamespacedValidatingPolicy team-a/team-label": false, // not served, no status yet
	}
	if len(got) != len(want) {
		t.Errorf("inventory %v, want %v", got, want)
	}
	for name, ready := range want {
		if r, ok := got[name]; !ok || r != ready {
			t.Errorf("%s: ready %v (listed %v), want %v", name, r, ok, ready)
		}
	}

	if states, err := policyInventory(reader, staticServed{synced: false})(); err != nil || len(states) != 0 {
		t.Errorf("before the cache synced: %d policies (%v), want none", len(states), err)
	}
	failing := failingReader{Reader: reader, err: errors.New("no informer")}
	if _, err := policyInventory(failing, staticServed{synced: true, snapshot: snapshot})(); err == nil {
		t.Error("a failing read gave no error")
	}
}

type failingReader struct {
	client.Reader
	err error
}

func (r failingReader) List(_ context.Context, _ client.ObjectList, _ ...client.ListOption) error {
	return r.err
}
