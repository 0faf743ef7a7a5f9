package background

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// TestResync: without any new event, the periodic resync gives a trigger
// admission missed its downstream object (a synchronized rule, trigger
// created after the policy), leaves a trigger older than a policy without
// generateExisting alone, and gives a Failed UpdateRequest one more
// attempt once its cause is gone (the clone source appears): done, it is
// removed.
func TestResync(t *testing.T) {
	e := startEnv(t)
	e.namespace("before")
	time.Sleep(1100 * time.Millisecond) // creation timestamps have seconds only
	e.startController(Options{ResyncInterval: 2 * time.Second, MaxAttempts: 2, RetryBase: 100 * time.Millisecond})
	noExisting := func(p *kyvernov1.ClusterPolicy) {
		f := false
		p.Spec.Rules[0].Generation.GenerateExisting = &f
	}
	e.applyPolicy("default-deny.yaml", noExisting)
	e.applyPolicy("clone-secret.yaml", noExisting)

	// Admission never saw this namespace.
	e.namespace("missed")
	e.wantPolicyTypes("missed", networkingv1.PolicyTypeIngress)

	// This one it saw, but the clone source is missing: the UpdateRequest
	// fails its attempts and stays Failed.
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}})
	seen := e.namespace("seen")
	e.admit(kyvernov1.Create, seen, nil)
	e.eventually("the clone's UpdateRequest Failed", func() error {
		for _, ur := range e.updateRequests() {
			if ur.Status.State == kyvernov2.Failed {
				return nil
			}
		}
		return fmt.Errorf("no Failed UpdateRequest among %d", len(e.updateRequests()))
	})
	e.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "registry"}, StringData: map[string]string{"token": "v1"}})
	e.eventually("the Failed UpdateRequest is retried at the resync and removed", func() error {
		if urs := e.updateRequests(); len(urs) != 0 {
			return fmt.Errorf("%d UpdateRequests left: %+v", len(urs), urs[0].Status)
		}
		return nil
	})
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "seen", Name: "registry"}, &corev1.Secret{}); err != nil {
		t.Errorf("the clone: %v", err)
	}

	// Several resyncs later the namespace older than the policy still has
	// no NetworkPolicy: generateExisting is false.
	if _, err := e.networkPolicy("before"); !apierrors.IsNotFound(err) {
		t.Errorf("NetworkPolicy in the namespace older than the policy: err %v, want NotFound", err)
	}
}
