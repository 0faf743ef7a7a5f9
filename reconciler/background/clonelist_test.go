package background

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestCloneListForeachOrphan: cloneList copies every selected Secret of
// the source namespace and foreach generates one object per element, both
// with their generate labels; deleting the policy deletes the synchronized
// foreach objects and keeps the cloneList copies, whose rule sets
// orphanDownstreamOnPolicyDelete.
func TestCloneListForeachOrphan(t *testing.T) {
	e := startEnv(t)
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}})
	for _, s := range []struct{ name, copy string }{{"pull-a", "yes"}, {"pull-b", "yes"}, {"private", "no"}} {
		e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: s.name, Labels: map[string]string{"copy": s.copy}},
			StringData: map[string]string{"token": s.name}})
	}
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{"bg-test": "true"},
		Annotations: map[string]string{"configs": "alpha,beta"}}})
	e.startController(Options{})
	p := e.applyPolicy("clonelist-foreach.yaml", nil)

	get := func(obj client.Object, name string) error {
		return e.cl.Get(e.ctx, client.ObjectKey{Namespace: "team", Name: name}, obj)
	}
	e.eventually("the selected Secrets copied and one ConfigMap per element", func() error {
		for _, name := range []string{"pull-a", "pull-b"} {
			var s corev1.Secret
			if err := get(&s, name); err != nil {
				return err
			}
			if string(s.Data["token"]) != name || s.Labels["generate.kyverno.io/rule-name"] != "registries" || s.Labels["generate.kyverno.io/source-namespace"] != "platform" {
				return fmt.Errorf("Secret %s: data %v, labels %v", name, s.Data, s.Labels)
			}
		}
		for i, el := range []string{"alpha", "beta"} {
			var cm corev1.ConfigMap
			if err := get(&cm, "cfg-"+el); err != nil {
				return err
			}
			if cm.Data["index"] != fmt.Sprint("n-", i) || cm.Labels["generate.kyverno.io/rule-name"] != "configs" {
				return fmt.Errorf("ConfigMap cfg-%s: data %v, labels %v", el, cm.Data, cm.Labels)
			}
		}
		return nil
	})
	if err := get(&corev1.Secret{}, "private"); !apierrors.IsNotFound(err) {
		t.Errorf("a Secret the selector leaves out was copied (err %v)", err)
	}

	if err := e.cl.Delete(e.ctx, p); err != nil {
		t.Fatal(err)
	}
	e.eventually("the foreach ConfigMaps deleted with the policy", func() error {
		for _, el := range []string{"alpha", "beta"} {
			if err := get(&corev1.ConfigMap{}, "cfg-"+el); !apierrors.IsNotFound(err) {
				return fmt.Errorf("cfg-%s still there (err %v)", el, err)
			}
		}
		return nil
	})
	for _, name := range []string{"pull-a", "pull-b"} {
		if err := get(&corev1.Secret{}, name); err != nil {
			t.Errorf("orphaned copy %s: %v", name, err)
		}
	}
}
