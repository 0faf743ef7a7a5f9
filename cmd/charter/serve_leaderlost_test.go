package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
	"github.com/charter-dev/charter/internal/leadership/leadershiptest"
)

// charter serve's leader Lease taken by another holder (as when a renewal
// misses its deadline under load, issue #31) stops the leader-only work,
// not the process: admission answers every review while the Lease is
// held elsewhere, a policy installed meanwhile gets no status from this
// replica, and once the Lease is free charter leads again and writes it.
func TestServeAdmitsThroughALostLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cp := controlplanetest.Start(ctx, t)
	cfg := cp.RESTConfig()
	cl := devTestClient(t, cfg)
	cs := kubernetes.NewForConfigOrDie(cfg)
	const ns, leaseName = "charter", "charter"
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	createClusterPolicy(ctx, t, cl, requireTeamPolicy("Enforce"))

	port, err := freeLocalPort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	startServeManager(ctx, t, cfg, serveOptions{
		controllers: []string{controllerAdmission, controllerReports}, namespace: ns,
		webhookAddr: addr, webhookURL: "https://" + addr, metricsAddr: "0", healthAddr: "0",
		leaderElect: true, leaseName: leaseName, retryPeriod: 500 * time.Millisecond,
		requestTimeout: 10 * time.Second, maxRequestBytes: 7 << 20, repeatable: true,
	})
	if err := waitForWebhook(ctx, cl); err != nil {
		t.Fatal(err)
	}
	waitForLeading(t, leaseName, true)
	waitForPolicyReady(ctx, t, cl, "require-team")
	// Every review is answered by charter: the labelled Pod admitted, the
	// other refused with the policy's message (a call that failed would
	// be refused by failurePolicy Fail, with another message).
	admits := func(n int) {
		t.Helper()
		for i := range n {
			pod := teamlessPod(fmt.Sprintf("p-%d", i))
			err := cl.Create(ctx, pod, client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), "rule check-team failed") {
				t.Fatalf("review %d of a Pod without a team: %v, want charter's refusal", i, err)
			}
			pod.Labels = map[string]string{"team": "a"}
			if err := cl.Create(ctx, pod, client.DryRunAll); err != nil {
				t.Fatalf("review %d of a Pod with a team: %v", i, err)
			}
		}
	}
	admits(5)

	// Another holder takes the Lease, for an hour.
	leadershiptest.TakeLease(ctx, t, cs, ns, leaseName)
	waitForLeading(t, leaseName, false)
	createClusterPolicy(ctx, t, cl, strings.Replace(requireTeamPolicy("Audit"), "name: require-team", "name: audit-team", 1))
	admits(50)
	if ready, why := policyStatus(ctx, t, cl, "audit-team"); ready || why != "no Ready condition" {
		t.Errorf("a policy installed while another replica held the Lease got a status from this one: ready %v, %s", ready, why)
	}

	// The Lease is free again: charter leads again and catches up.
	if err := cs.CoordinationV1().Leases(ns).Delete(ctx, leaseName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForLeading(t, leaseName, true)
	waitForPolicyReady(ctx, t, cl, "audit-team")
	admits(5)
}

func createClusterPolicy(ctx context.Context, t *testing.T, cl client.Client, doc string) {
	t.Helper()
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, &obj); err != nil {
		t.Fatal(err)
	}
}

// policyStatus reads a ClusterPolicy's Ready condition (policyReady).
func policyStatus(ctx context.Context, t *testing.T, cl client.Client, name string) (bool, string) {
	t.Helper()
	var obj unstructured.Unstructured
	obj.SetAPIVersion("kyverno.io/v1")
	obj.SetKind("ClusterPolicy")
	if err := cl.Get(ctx, client.ObjectKey{Name: name}, &obj); err != nil {
		t.Fatal(err)
	}
	return policyReady(&obj)
}

func waitForPolicyReady(ctx context.Context, t *testing.T, cl client.Client, name string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ready, why := policyStatus(ctx, t, cl, name)
		if ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ClusterPolicy %s not Ready within a minute: %s", name, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitForLeading waits up to a minute until this process leads the Lease
// (or no longer does), as client-go's leader election tells
// controller-runtime's registry (leader_election_master_status).
func waitForLeading(t *testing.T, lease string, leading bool) {
	t.Helper()
	want := 0.0
	if leading {
		want = 1
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := leaderStatus(lease)
		if err != nil {
			t.Fatal(err)
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leader_election_master_status{name=%q} is %v after a minute, want %v", lease, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func leaderStatus(lease string) (float64, error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	for _, f := range families {
		if f.GetName() != "leader_election_master_status" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == lease {
					return m.GetGauge().GetValue(), nil
				}
			}
		}
	}
	return 0, nil
}
