package admission

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/internal/reliability"
	"github.com/charter-dev/charter/webhook/certs"
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

// rotationPolicy refuses unlabelled Pods in namespace rotation, failing
// closed: a review charter does not answer is a refused write.
const rotationPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: rotation-require-name
spec:
  background: false
  rules:
  - name: check-name
    match: {any: [{resources: {kinds: [Pod], namespaces: [rotation]}}]}
    validate:
      failureAction: Enforce
      message: "label app.kubernetes.io/name is required"
      pattern: {metadata: {labels: {app.kubernetes.io/name: "?*"}}}`

// TestReliabilityCertificateRotation (issue #31, faults): while four
// writers send dry-run Pods through the API server to charter's
// fail-closed webhook, charter's serving certificate is reissued three
// times: its TLS Secret deleted, its CA Secret deleted (a new CA), both.
// Every review must be answered by charter, admitted or refused by the
// policy: a TLS failure or a failed webhook call is a failed admission.
func TestReliabilityCertificateRotation(t *testing.T) {
	f := startAdmission(t, withNamespaces("rotation"))
	ctx, cl := f.ctx, f.client
	f.installReady(t, rotationPolicy)
	rotationPod := func(name string, good bool) *corev1.Pod {
		p := pod(name, nil)
		p.Namespace = "rotation"
		if good {
			p.Labels = map[string]string{"app.kubernetes.io/name": "web"}
		}
		return p
	}
	eventually(t, "an unlabelled Pod refused", 30*time.Second, deniedBy("validate.charter.svc-fail", "label app.kubernetes.io/name is required",
		func() error { return cl.Create(ctx, rotationPod("probe", false), client.DryRunAll) }))

	var answered, admitted atomic.Int64
	var mu sync.Mutex
	var failures []string
	streamCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; streamCtx.Err() == nil; i++ {
				good := (i+w)%2 == 0
				err := cl.Create(streamCtx, rotationPod(fmt.Sprintf("w%d-%d", w, i), good), client.DryRunAll)
				switch {
				case streamCtx.Err() != nil:
					return
				case err == nil && good:
					admitted.Add(1)
				case err != nil && !good && strings.Contains(err.Error(), "label app.kubernetes.io/name is required"):
				default:
					mu.Lock()
					failures = append(failures, fmt.Sprintf("good=%t: %v", good, err))
					mu.Unlock()
				}
				answered.Add(1)
			}
		})
	}
	caSecret, tlsSecret := certs.SecretNames("charter-svc", charterNamespace)
	served := func() *x509.Certificate {
		conn, err := tls.Dial("tcp", f.options.Addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only reads which certificate is served
		if err != nil {
			return nil
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	waitAnswers := func(n int64) {
		from := answered.Load()
		eventually(t, fmt.Sprintf("%d more reviews answered", n), 60*time.Second, func() error {
			if answered.Load() < from+n {
				return errNotYet(fmt.Sprintf("%d answered", answered.Load()-from))
			}
			return nil
		})
	}
	waitAnswers(40)
	rotations := [][]string{{tlsSecret}, {caSecret}, {caSecret, tlsSecret}}
	for _, deleted := range rotations {
		before := served()
		for _, name := range deleted {
			if err := cl.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: charterNamespace, Name: name}}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "a new certificate served after deleting "+strings.Join(deleted, ", "), 60*time.Second, func() error {
			if now := served(); now == nil || now.Equal(before) {
				return errNotYet("the old certificate is still served")
			}
			return nil
		})
		waitAnswers(40)
	}
	stop()
	wg.Wait()
	for i, f := range failures {
		if i < 5 {
			t.Log("failed: " + f)
		}
	}
	reliability.Report(t, reliability.Figure{
		Part: "fault: serving certificate rotated under load",
		Figure: fmt.Sprintf("%d failed admissions of %d (%d admitted) through %d reissues (TLS Secret, CA Secret, both deleted)",
			len(failures), answered.Load(), admitted.Load(), len(rotations)),
		Target: "0 failed",
		OK:     len(failures) == 0 && admitted.Load() > 0,
	})
}
