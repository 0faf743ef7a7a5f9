package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/charter-dev/charter/internal/helmchart"
)

// TestNetworkPolicyAdmitsOnlyTheAPIServerToTheWebhook: config/networkpolicy
// and the chart's admissionController.networkPolicy render the same
// NetworkPolicy, which selects the admission Pods and admits the webhook
// port only from the API server's CIDRs; metrics and health stay open, and
// no other port is admitted.
func TestNetworkPolicyAdmitsOnlyTheAPIServerToTheWebhook(t *testing.T) {
	built := kustomizeBuild(t, "networkpolicy")
	if len(built) != 1 || built[0].GetKind() != "NetworkPolicy" {
		t.Fatalf("config/networkpolicy builds %d objects, want one NetworkPolicy", len(built))
	}
	chart := renderChart(t, "charter", map[string]any{"admissionController": map[string]any{"networkPolicy": map[string]any{
		"enabled": true, "apiServerCIDRs": []any{"192.0.2.1/32"},
	}}})
	var rendered []*networkingv1.NetworkPolicy
	for _, u := range chart.Objects {
		if u.GetKind() != "NetworkPolicy" {
			continue
		}
		u = u.DeepCopy()
		l := u.GetLabels()
		for _, k := range helmLabels {
			delete(l, k)
		}
		u.SetLabels(l)
		if d := cmp.Diff(plain(t, built[0]), plain(t, u)); d != "" {
			t.Errorf("NetworkPolicy differs (-config/networkpolicy +chart):\n%s", d)
		}
		var np networkingv1.NetworkPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &np); err != nil {
			t.Fatal(err)
		}
		rendered = append(rendered, &np)
	}
	if len(rendered) != 1 {
		t.Fatalf("the chart renders %d NetworkPolicies with networkPolicy.enabled, want 1", len(rendered))
	}
	np := rendered[0]
	if got := np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"]; got != "admission" {
		t.Errorf("podSelector selects component %q, want admission", got)
	}
	admitted := map[string][]networkingv1.NetworkPolicyPeer{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			admitted[p.Port.StrVal] = rule.From
		}
	}
	webhook := admitted["https"]
	if len(webhook) != 1 || webhook[0].IPBlock == nil || webhook[0].IPBlock.CIDR != "192.0.2.1/32" || webhook[0].PodSelector != nil || webhook[0].NamespaceSelector != nil {
		t.Errorf("the webhook port admits %+v, want only ipBlock 192.0.2.1/32", webhook)
	}
	for _, open := range []string{"metrics", "health"} {
		if from, ok := admitted[open]; !ok || len(from) != 0 {
			t.Errorf("port %s: admitted %v from %+v, want open to all", open, ok, from)
		}
	}
	if len(admitted) != 3 {
		t.Errorf("admitted ports %v, want https, metrics and health only", admitted)
	}
}

// TestNetworkPolicyNeedsTheAPIServerCIDRs: enabled without CIDRs would admit
// no one and fail every admission, so the chart refuses it; off (the
// default) renders none.
func TestNetworkPolicyNeedsTheAPIServerCIDRs(t *testing.T) {
	_, err := helmchart.Render(chartDir, helmchart.Options{Values: map[string]any{"admissionController": map[string]any{"networkPolicy": map[string]any{"enabled": true}}}})
	if err == nil || !strings.Contains(err.Error(), "admissionController.networkPolicy.apiServerCIDRs") {
		t.Errorf("networkPolicy.enabled without apiServerCIDRs: %v, want a refusal naming apiServerCIDRs", err)
	}
	for _, u := range renderChart(t, "charter", nil).Objects {
		if u.GetKind() == "NetworkPolicy" {
			t.Errorf("the chart's defaults render %s", key(u))
		}
	}
}
