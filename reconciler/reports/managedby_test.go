package reports

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// TestReportsManagedByKyverno: with ManagedBy kyverno
// (--reports-managed-by=kyverno) the controller labels its reports
// app.kubernetes.io/managed-by: kyverno, as Kyverno does, and takes the
// reports so labelled for its own: a report Kyverno left for a Pod that
// is gone is deleted by the next full rescan. With the default, charter
// leaves Kyverno's reports alone.
func TestReportsManagedByKyverno(t *testing.T) {
	e := startEnv(t)
	const ns = "reports-test"
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := e.apply("pod.yaml")
	e.apply("disallow-latest.yaml")
	// A report as Kyverno leaves it, of a Pod that no longer exists.
	left := report.Scope{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: "gone", UID: "7b1d2c3e-0000-4000-8000-000000000001"}
	_, podReport, err := e.results(ns, string(pod.GetUID()))
	if err != nil {
		t.Fatal(err)
	}
	if podReport != nil {
		t.Fatalf("a report before any controller ran: %v", podReport.GetLabels())
	}
	leftover := report.Object(policyreport.WGPolicyK8s, report.KyvernoManagedBy, left, []v1alpha2.PolicyReportResult{
		{Policy: "disallow-latest", Rule: "no-latest", Result: v1alpha2.StatusFail, Source: "kyverno", Message: "left by Kyverno"}})
	if _, err := e.dyn.Resource(policyreport.WGPolicyK8s.Resource(false)).Namespace(ns).Create(e.ctx, leftover, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("by default charter leaves Kyverno's reports alone", func(t *testing.T) {
		c, stop := e.startController(Options{GoneGracePeriod: time.Millisecond})
		defer stop()
		rep := e.wantResults("the Pod's report", ns, string(pod.GetUID()), "disallow-latest/no-latest=fail")
		if got := rep.GetLabels()[report.ManagedByLabel]; got != report.ManagedBy {
			t.Errorf("the Pod's report is labelled managed-by %q, want %q", got, report.ManagedBy)
		}
		if err := c.FullRescan(e.ctx); err != nil {
			t.Fatal(err)
		}
		if ok, _ := e.reportExists(ns, left.UID); !ok {
			t.Error("charter deleted a report labelled managed-by kyverno")
		}
		// The next controller starts from no report of charter's.
		if err := e.dyn.Resource(policyreport.WGPolicyK8s.Resource(false)).Namespace(ns).Delete(e.ctx, string(pod.GetUID()), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("with kyverno charter writes Kyverno's label and adopts Kyverno's reports", func(t *testing.T) {
		c, stop := e.startController(Options{ManagedBy: report.KyvernoManagedBy, GoneGracePeriod: time.Millisecond})
		defer stop()
		rep := e.wantResults("the Pod's report", ns, string(pod.GetUID()), "disallow-latest/no-latest=fail")
		if got := rep.GetLabels()[report.ManagedByLabel]; got != report.KyvernoManagedBy {
			t.Errorf("the Pod's report is labelled managed-by %q, want %q", got, report.KyvernoManagedBy)
		}
		if err := c.FullRescan(e.ctx); err != nil {
			t.Fatal(err)
		}
		e.wantNoReport("the report Kyverno left for a gone Pod", ns, left.UID)
		if n := e.reportCount(policyreport.WGPolicyK8s); n != 0 {
			t.Errorf("%d reports labelled managed-by charter", n)
		}
	})
}
