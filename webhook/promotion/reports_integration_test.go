package promotion

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
)

// TestGateDecidesTheSameOnEitherReportAPI writes one resource's report,
// as the reports controller writes it, in each report API on the real
// API server, and checks that the gate reading either API refuses the
// same promotion with the same message, and admits it once the result
// passes. A reader of one API does not see the other's reports.
func TestGateDecidesTheSameOnEitherReportAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cp := controlplanetest.Start(ctx, t)
	cl, err := client.New(cp.RESTConfig(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"shop", "old", "kyv"} {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	apis := []policyreport.API{policyreport.WGPolicyK8s, policyreport.OpenReports}
	reportOf := func(api policyreport.API, namespace, result string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{
				"name": "0d1c7a52-0000-4000-8000-000000000001", "namespace": namespace,
				"labels": map[string]any{reportManagedByLabel: reportManagedBy},
			},
			"scope": map[string]any{"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": "legacy",
				"uid": "0d1c7a52-0000-4000-8000-000000000001"},
			"results": []any{map[string]any{
				"source": "charter", "policy": "require-name-label", "rule": "check-name", "result": result, "scored": true,
				"message":   "label 'app.kubernetes.io/name' is required",
				"timestamp": map[string]any{"seconds": int64(1700000000), "nanos": int64(0)}}},
		}}
		u.SetGroupVersionKind(api.GroupVersion().WithKind(api.Kind(false)))
		return u
	}
	for _, api := range apis {
		if err := cl.Create(ctx, reportOf(api, "shop", "fail")); err != nil {
			t.Fatalf("creating the %s: %v", api.Kind(false), err)
		}
	}
	// Only a PolicyReport in namespace old: what charter wrote before it
	// was switched to OpenReports.
	if err := cl.Create(ctx, reportOf(policyreport.WGPolicyK8s, "old", "fail")); err != nil {
		t.Fatal(err)
	}
	staged := []Policy{{Key: "require-name-label"}}
	check := func(api policyreport.API, namespace string) string {
		t.Helper()
		msg, err := (&Gate{Reports: ReportReader{Reader: cl, API: api}}).Check(ctx, namespace, staged)
		if err != nil {
			t.Fatalf("gate on %s: %v", api, err)
		}
		return msg
	}

	want := `namespace "shop" cannot be labelled charter.dev/enforcement=enforce: 1 result of a staged policy fails there and would be denied under Enforce: ` +
		`Pod/legacy (require-name-label/check-name: fail); fix them or add PolicyExceptions, then label the namespace again`
	for _, api := range apis {
		if got := check(api, "shop"); got != want {
			t.Errorf("gate on %s:\n got %q\nwant %q", api, got, want)
		}
	}
	if got := check(policyreport.WGPolicyK8s, "old"); got == "" {
		t.Error("gate on wgpolicyk8s admits namespace old, whose PolicyReport fails")
	}
	if got := check(policyreport.OpenReports, "old"); got != "" {
		t.Errorf("gate on openreports read a PolicyReport: %q", got)
	}

	// The result passes now, in both APIs: both gates admit.
	for _, api := range apis {
		u := reportOf(api, "shop", "pass")
		stored := reportOf(api, "shop", "pass")
		if err := cl.Get(ctx, client.ObjectKeyFromObject(u), stored); err != nil {
			t.Fatal(err)
		}
		u.SetResourceVersion(stored.GetResourceVersion())
		if err := cl.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
		if got := check(api, "shop"); got != "" {
			t.Errorf("gate on %s refuses a namespace whose report passes: %q", api, got)
		}
	}

	// A report labelled managed-by kyverno is charter's own only when
	// charter writes Kyverno's label (--reports-managed-by=kyverno).
	kyv := reportOf(policyreport.WGPolicyK8s, "kyv", "fail")
	kyv.SetLabels(map[string]string{reportManagedByLabel: "kyverno"})
	if err := cl.Create(ctx, kyv); err != nil {
		t.Fatal(err)
	}
	if got := check(policyreport.WGPolicyK8s, "kyv"); got != "" {
		t.Errorf("gate of charter's reports read a report labelled managed-by kyverno: %q", got)
	}
	msg, err := (&Gate{Reports: ReportReader{Reader: cl, ManagedBy: "kyverno"}}).Check(ctx, "kyv", staged)
	if err != nil || msg == "" {
		t.Errorf("gate with ManagedBy kyverno on a failing report labelled kyverno: %q, %v; want a refusal", msg, err)
	}
}
