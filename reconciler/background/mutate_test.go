package background

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// TestMutateExistingTargets: a target's context entry (a ConfigMap) and
// preconditions decide per target (a frozen ConfigMap is left alone), and
// a target write carries the resourceVersion it was read at: a concurrent
// edit makes it fail with a conflict instead of being overwritten.
func TestMutateExistingTargets(t *testing.T) {
	e := startEnv(t)
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}})
	e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "rollout"}, Data: map[string]string{"version": "v7"}})
	e.namespace("apps")
	e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}})
	e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db", Labels: map[string]string{"frozen": "yes"}}})
	c, _ := e.startController(Options{})
	e.applyPolicy("rollout-configmaps.yaml", nil)

	get := func(name string) *corev1.ConfigMap {
		t.Helper()
		var cm corev1.ConfigMap
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "apps", Name: name}, &cm); err != nil {
			t.Fatal(err)
		}
		return &cm
	}
	e.eventually("ConfigMap apps/web labelled with the context's version", func() error {
		if v := get("web").Labels["version"]; v != "v7" {
			return fmt.Errorf("version label %q", v)
		}
		return nil
	})
	if v, ok := get("db").Labels["version"]; ok {
		t.Errorf("the frozen ConfigMap was mutated: version %q", v)
	}

	// A write at a resourceVersion someone else moved on from.
	stale := get("web")
	edited := stale.DeepCopy()
	edited.Data = map[string]string{"edited": "by a user"}
	if err := e.cl.Update(e.ctx, edited); err != nil {
		t.Fatal(err)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stale)
	if err != nil {
		t.Fatal(err)
	}
	obj["apiVersion"], obj["kind"] = "v1", "ConfigMap"
	obj["metadata"].(map[string]any)["labels"] = map[string]any{"version": "stale"}
	err = c.writeTarget(e.ctx, nil, obj, "")
	if err == nil || !strings.Contains(err.Error(), "changed while it was mutated") {
		t.Fatalf("stale write: err %v, want a conflict", err)
	}
	if cm := get("web"); cm.Data["edited"] != "by a user" || cm.Labels["version"] != "v7" {
		t.Errorf("the concurrent edit was overwritten: data %v, labels %v", cm.Data, cm.Labels)
	}
}

// TestForgedTriggerDrivesNoWrite: an UpdateRequest whose trigger the API
// server does not hold, as a forged admission review makes one, writes
// nothing: an UPDATE of an object that exists under another uid is
// skipped (state Skip, saying why), a CREATE of one that never existed
// fails after its retries; the target is left as it was. Before, the
// controller mutated from the object the UpdateRequest recorded.
func TestForgedTriggerDrivesNoWrite(t *testing.T) {
	e := startEnv(t)
	five := e.namespace("five")
	e.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "five", Name: "settings"}})
	e.startController(Options{MaxAttempts: 2, RetryBase: 100 * time.Millisecond})
	e.applyPolicy("label-configmaps.yaml", nil)
	// The policy's own run (mutateExistingOnPolicyUpdate) labels the
	// target; the label is taken off again, so that only a forged
	// trigger could put it back.
	var cm corev1.ConfigMap
	e.eventually("the policy's run labelled five/settings", func() error {
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "five", Name: "settings"}, &cm); err != nil {
			return err
		}
		if cm.Labels["rolled"] != "v1" {
			return fmt.Errorf("labels %v", cm.Labels)
		}
		cm.Labels = nil
		return e.cl.Update(e.ctx, &cm)
	})
	forged := five.DeepCopy()
	forged.UID = "forged-uid"
	e.admit(kyvernov1.Update, forged, forged)
	ghost := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "five", UID: "ghost-uid", Labels: map[string]string{"bg-test": "true"}}}
	e.admit(kyvernov1.Create, ghost, nil)
	e.eventually("both UpdateRequests settled without a write", func() error {
		var skipped, failed int
		for _, ur := range e.updateRequests() {
			switch {
			case ur.Status.State == kyvernov2.Skip && strings.Contains(ur.Status.Message, "with uid forged-uid is not in the cluster"):
				skipped++
			case ur.Status.State == kyvernov2.Failed && strings.Contains(ur.Status.Message, "with uid ghost-uid not found (yet)"):
				failed++
			}
		}
		if skipped != 1 || failed != 1 {
			return fmt.Errorf("skipped %d, failed %d: %+v", skipped, failed, e.updateRequests())
		}
		return nil
	})
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "five", Name: "settings"}, &cm); err != nil {
		t.Fatal(err)
	}
	if len(cm.Labels) != 0 {
		t.Errorf("a forged trigger drove a write: labels %v", cm.Labels)
	}
}
