package background

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// TestGenerateOnDelete: a rule whose match names DELETE generates from the
// deleted object once the delete happened; what it generated stays when
// its trigger is gone, even when synchronized and edited; a deletion the
// API server did not carry out generates nothing and says so.
func TestGenerateOnDelete(t *testing.T) {
	e := startEnv(t)
	e.namespace("tomb")
	precious := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tomb", Name: "precious"}}
	kept := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "tomb", Name: "kept"}}
	e.create(precious)
	e.create(kept)
	e.startController(Options{MaxAttempts: 2, RetryBase: 100 * time.Millisecond})
	e.applyPolicy("tombstone.yaml", nil)

	if err := e.cl.Delete(e.ctx, precious); err != nil {
		t.Fatal(err)
	}
	e.admit(kyvernov1.Delete, nil, precious)
	tombstone := func() (*corev1.ConfigMap, error) {
		var cm corev1.ConfigMap
		err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "tomb", Name: "precious-deleted"}, &cm)
		return &cm, err
	}
	e.eventually("the ConfigMap generated from the deleted one", func() error {
		cm, err := tombstone()
		if err != nil {
			return err
		}
		if cm.Data["deleted"] != "precious" {
			return fmt.Errorf("data %v", cm.Data)
		}
		return nil
	})

	// Its trigger is gone by design: an edit of it is not taken for the
	// trigger's deletion.
	cm, err := tombstone()
	if err != nil {
		t.Fatal(err)
	}
	cm.Labels["edited"] = "yes"
	if err := e.cl.Update(e.ctx, cm); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if _, err := tombstone(); err != nil {
		t.Errorf("the generated ConfigMap after an edit: %v", err)
	}

	// A DELETE that did not happen (another webhook denied it).
	e.admit(kyvernov1.Delete, nil, kept)
	e.eventually("the UpdateRequest of the denied delete fails, saying why", func() error {
		for _, ur := range e.updateRequests() {
			if ur.Status.State == kyvernov2.Failed && strings.Contains(ur.Status.Message, "still exists in the cluster") {
				return nil
			}
		}
		return fmt.Errorf("no Failed UpdateRequest naming the live trigger among %d", len(e.updateRequests()))
	})
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "tomb", Name: "kept-deleted"}, &corev1.ConfigMap{}); err == nil {
		t.Error("generated from a trigger that was not deleted")
	}
}
