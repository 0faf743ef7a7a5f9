package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/internal/reliability"
)

// failClosedEverywhere fails closed (failurePolicy Fail, the default) on
// every kind and refuses whatever lacks a label: with charter down, its
// webhook would refuse every write it sees.
const failClosedEverywhere = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: fail-closed-everywhere
spec:
  background: false
  rules:
  - name: require-label
    match: {any: [{resources: {kinds: ["*"]}}]}
    validate:
      failureAction: Enforce
      message: "label reliability is required"
      pattern: {metadata: {labels: {reliability: "?*"}}}
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: fail-closed-named
spec:
  background: false
  rules:
  - name: require-label
    match: {any: [{resources: {kinds: [Node, Lease, ConfigMap, Pod]}}]}
    validate:
      failureAction: Enforce
      message: "label reliability is required"
      pattern: {metadata: {labels: {reliability: "?*"}}}`

// TestReliabilityCharterAbsent (issue #31, faults; kyverno#16177): with
// policies that fail closed on every kind installed and charter's
// admission server gone (its webhook configurations left behind, as a
// crashed or killed charter leaves them), what keeps a cluster alive is
// still written: objects in kube-system, in charter's own namespace and
// in kube-public, the kubelets' heartbeat Leases in kube-node-lease,
// Nodes and their status. A Pod elsewhere is refused: the policies do
// fail closed, so the writes above got through by design, not by chance.
func TestReliabilityCharterAbsent(t *testing.T) {
	f := startAdmission(t, withNamespaces("shop"))
	ctx, cl := f.ctx, f.client
	f.installReady(t, failClosedEverywhere)
	tries := 0
	eventually(t, "an unlabelled ConfigMap refused while charter runs", 30*time.Second,
		deniedBy("validate.charter.svc-fail", "label reliability is required", func() error {
			// A new name each try: one admitted before the webhook was in
			// place must not turn the next try into AlreadyExists.
			tries++
			return cl.Create(ctx, configMap("shop", fmt.Sprintf("while-up-%d", tries)))
		}))

	if err := f.stopManager(); err != nil {
		t.Fatalf("stopping charter: %v", err)
	}
	// Charter is gone once a write its webhook sees fails to reach it.
	eventually(t, "charter's webhook unreachable", 30*time.Second, func() error {
		err := cl.Create(ctx, pod("probe", nil))
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			return fmt.Errorf("want the webhook call to fail, got %v", err)
		}
		return nil
	})

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	renew := metav1.NewMicroTime(time.Now())
	holder := "node-1"
	writes := []struct {
		what  string
		write func() error
	}{
		{"ConfigMap in kube-system", func() error { return cl.Create(ctx, configMap("kube-system", "absent")) }},
		{"ConfigMap in charter's namespace", func() error { return cl.Create(ctx, configMap(charterNamespace, "absent")) }},
		{"ConfigMap in kube-public", func() error { return cl.Create(ctx, configMap("kube-public", "absent")) }},
		{"node heartbeat Lease in kube-node-lease", func() error {
			return cl.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: "node-1"},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renew},
			})
		}},
		{"Lease renewed", func() error {
			var l coordinationv1.Lease
			if err := cl.Get(ctx, client.ObjectKey{Namespace: "kube-node-lease", Name: "node-1"}, &l); err != nil {
				return err
			}
			now := metav1.NewMicroTime(time.Now())
			l.Spec.RenewTime = &now
			return cl.Update(ctx, &l)
		}},
		{"Node created", func() error { return cl.Create(ctx, node) }},
		{"Node status updated", func() error {
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				LastHeartbeatTime: metav1.Now(), Reason: "KubeletReady"}}
			return cl.Status().Update(ctx, node)
		}},
		{"Node labelled", func() error {
			node.Labels = map[string]string{"topology.kubernetes.io/zone": "a"}
			return cl.Update(ctx, node)
		}},
	}
	admitted := 0
	for _, w := range writes {
		if err := w.write(); err != nil {
			t.Errorf("%s with charter down: %v", w.what, err)
			continue
		}
		admitted++
	}
	// Elsewhere the policies fail closed.
	elsewhere := cl.Create(ctx, configMap("shop", "while-down"))
	if elsewhere == nil || !strings.Contains(elsewhere.Error(), "failed calling webhook") {
		t.Errorf("a ConfigMap in shop with charter down: want refused (failurePolicy Fail), got %v", elsewhere)
	}
	reliability.Report(t, reliability.Figure{
		Part:   "fault: charter absent, failurePolicy Fail",
		Figure: fmt.Sprintf("%d of %d writes to kube-system, charter's namespace, kube-public, node Leases and Nodes admitted; elsewhere refused: %t", admitted, len(writes), elsewhere != nil),
		Target: "all admitted, elsewhere refused",
		OK:     admitted == len(writes) && elsewhere != nil,
	})
}

// configMap is an unlabelled ConfigMap.
func configMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"a": "b"}}
}
