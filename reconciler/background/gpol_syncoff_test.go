package background

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// TestGeneratingPolicySyncTurnedOff: a synchronized GeneratingPolicy puts a
// deleted downstream object back; once an edit turns synchronize off, a
// downstream object deleted right after the edit stays deleted, as
// Kyverno's update-policy-to-disable-sync tests expect. charter put it
// back: the deletion reached the controller before the edit did, and the
// work it queued then created the missing object whatever the policy said
// by the time it ran.
func TestGeneratingPolicySyncTurnedOff(t *testing.T) {
	e := startEnv(t)
	e.startController(Options{MaxAttempts: 2, RetryBase: 100 * time.Millisecond})
	e.createCELPolicies("gpol-sync-off.yaml")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sync-off", Labels: map[string]string{"sync-off": "true"}}}
	e.create(ns)
	e.admit(kyvernov1.Create, ns, nil)
	key := client.ObjectKey{Namespace: "sync-off", Name: "synced"}
	exists := func() error { return e.cl.Get(e.ctx, key, &corev1.ConfigMap{}) }
	deleteIt := func() {
		t.Helper()
		if err := e.cl.Delete(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually("the ConfigMap generated", exists)
	deleteIt()
	e.eventually("synchronize: the deleted ConfigMap is back", exists)

	var p policiesv1.GeneratingPolicy
	if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "gpol-sync-off"}, &p); err != nil {
		t.Fatal(err)
	}
	p.Spec.EvaluationConfiguration.Synchronize.Enabled = false
	if err := e.cl.Update(e.ctx, &p); err != nil {
		t.Fatal(err)
	}
	deleteIt()
	// Longer than the settle time of downstream work and the policy
	// cache's gathering of changes together.
	for deadline := time.Now().Add(3 * downstreamSettle); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err := exists(); !apierrors.IsNotFound(err) {
			t.Fatalf("the ConfigMap deleted after synchronize was turned off: %v, want it to stay deleted", err)
		}
	}
}
