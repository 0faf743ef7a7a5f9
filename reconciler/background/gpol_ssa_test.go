package background

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// TestGeneratingPolicyServerSideApplyReapplies: a GeneratingPolicy with
// useServerSideApply and no synchronize applies its object again when
// its trigger is updated: the field it sets that another manager changed
// is taken back, the other manager's own annotation stays (Kyverno's
// chainsaw generating-policies/ssa/update). charter left the drifted
// object alone: without synchronize it never wrote an existing object.
func TestGeneratingPolicyServerSideApplyReapplies(t *testing.T) {
	e := startEnv(t)
	e.startController(Options{MaxAttempts: 2, RetryBase: 100 * time.Millisecond})
	e.createCELPolicies("gpol-ssa.yaml")

	trigger := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gpol-ssa-target", Labels: map[string]string{"ssa": "yes", "bg-test": "true"}}}
	e.create(trigger)
	e.admit(kyvernov1.Create, trigger, nil)
	key := client.ObjectKey{Namespace: "gpol-ssa-target", Name: "ssa-config"}
	e.eventually("the ConfigMap generated", func() error {
		return e.cl.Get(e.ctx, key, &corev1.ConfigMap{})
	})

	drift := []byte(`{"metadata":{"annotations":{"other-controller-managed":"true"}},"data":{"key":"drifted"}}`)
	if err := e.cl.Patch(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}},
		client.RawPatch(types.MergePatchType, drift)); err != nil {
		t.Fatal(err)
	}
	old := trigger.DeepCopy()
	if err := e.cl.Get(e.ctx, client.ObjectKeyFromObject(trigger), trigger); err != nil {
		t.Fatal(err)
	}
	trigger.Labels["trigger-update"] = "1"
	if err := e.cl.Update(e.ctx, trigger); err != nil {
		t.Fatal(err)
	}
	e.admit(kyvernov1.Update, trigger, old)
	e.eventually("the ConfigMap's data applied again, the other manager's annotation kept", func() error {
		var cm corev1.ConfigMap
		if err := e.cl.Get(e.ctx, key, &cm); err != nil {
			return err
		}
		if cm.Data["key"] != "original" || cm.Annotations["other-controller-managed"] != "true" {
			return fmt.Errorf("data %v, annotations %v", cm.Data, cm.Annotations)
		}
		return nil
	})
}
