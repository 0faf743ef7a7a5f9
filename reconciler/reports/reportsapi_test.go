package reports

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// reportCount counts charter's reports of both kinds in one API.
func (e *env) reportCount(api policyreport.API) int {
	e.t.Helper()
	n := 0
	for _, clusterScoped := range []bool{false, true} {
		list, err := e.dyn.Resource(api.Resource(clusterScoped)).List(e.ctx, metav1.ListOptions{LabelSelector: report.ManagedByLabel + "=" + report.ManagedBy})
		if err != nil {
			e.t.Fatal(err)
		}
		n += len(list.Items)
	}
	return n
}

// TestReportsAPIs runs the controller and its admission writer with
// --reports-api=openreports, then, on the same cluster, with both:
// background and admission results, of a namespaced and of a
// cluster-scoped resource, land in OpenReports' Report and ClusterReport
// and, with openreports alone, in no wgpolicyk8s report; with both, the
// two APIs say the same, and a copy that went missing is written again
// by the next sweep.
func TestReportsAPIs(t *testing.T) {
	e := startEnv(t)
	nsObj, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "reports-test"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsUID := string(nsObj.UID)
	pod := e.apply("pod.yaml")
	podUID := string(pod.GetUID())
	e.apply("disallow-latest.yaml")
	e.apply("require-team.yaml")
	e.apply("namespace-owner.yaml")
	e.apply("admission-only.yaml")
	admit := func(admission *AdmissionQueue) {
		t.Helper()
		if !admission.Enqueue(Resource{APIVersion: "v1", Kind: "Pod", Namespace: "reports-test", Name: "web", UID: pod.GetUID()}, evaluateAdmission(t, pod)) {
			t.Fatal("queue full")
		}
	}
	podResults := []string{"admission-only/created-by=fail", "disallow-latest/no-latest=fail", "require-team/team-label=fail"}

	t.Run("openreports", func(t *testing.T) {
		admission := NewAdmissionQueue(10)
		_, stop := e.startController(Options{APIs: []policyreport.API{policyreport.OpenReports}, Admission: admission})
		defer stop()
		admit(admission)
		rep := e.wantResultsIn(policyreport.OpenReports, "the Pod's Report: background and admission results", "reports-test", podUID, podResults...)
		if rep.GetAPIVersion() != "openreports.io/v1alpha1" || rep.GetKind() != "Report" {
			t.Errorf("the Pod's report is a %s %s", rep.GetAPIVersion(), rep.GetKind())
		}
		parsed, err := report.Parse(rep)
		if err != nil {
			t.Fatal(err)
		}
		processes := map[string]string{}
		for _, r := range parsed.Results {
			processes[r.Policy] = r.Properties["process"]
		}
		if processes["admission-only"] != report.ProcessAdmission || processes["disallow-latest"] != report.ProcessBackground {
			t.Errorf("processes %v: want the admission writer's and the scan's results", processes)
		}
		if summary, _, _ := unstructured.NestedInt64(rep.Object, "summary", "fail"); summary != 3 {
			t.Errorf("summary fail %d, want 3", summary)
		}
		crep := e.wantResultsIn(policyreport.OpenReports, "the Namespace's ClusterReport", "", nsUID, "namespace-owner/owner-label=fail")
		if crep.GetKind() != "ClusterReport" {
			t.Errorf("the Namespace's report is a %s", crep.GetKind())
		}
		if n := e.reportCount(policyreport.WGPolicyK8s); n != 0 {
			t.Errorf("%d wgpolicyk8s reports written with --reports-api=openreports", n)
		}
	})

	t.Run("both", func(t *testing.T) {
		admission := NewAdmissionQueue(10)
		c, stop := e.startController(Options{APIs: []policyreport.API{policyreport.WGPolicyK8s, policyreport.OpenReports}, Admission: admission})
		defer stop()
		// wgpolicyk8s, the primary API, starts empty: the scans fill it,
		// and the OpenReports copies follow (the admission result, which
		// only the primary report would have kept, comes back with the
		// next admission).
		admit(admission)
		for _, api := range []policyreport.API{policyreport.WGPolicyK8s, policyreport.OpenReports} {
			e.wantResultsIn(api, "the Pod's report in "+string(api), "reports-test", podUID, podResults...)
			e.wantResultsIn(api, "the Namespace's report in "+string(api), "", nsUID, "namespace-owner/owner-label=fail")
		}

		// A copy removed behind charter's back is back after the next
		// sweep; its primary report was not rewritten.
		if err := e.dyn.Resource(policyreport.OpenReports.Resource(false)).Namespace("reports-test").Delete(e.ctx, podUID, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		_, before, err := e.results("reports-test", podUID)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.FullRescan(e.ctx); err != nil {
			t.Fatal(err)
		}
		e.wantResultsIn(policyreport.OpenReports, "the Pod's Report written again by the sweep", "reports-test", podUID, podResults...)
		_, after, err := e.results("reports-test", podUID)
		if err != nil {
			t.Fatal(err)
		}
		if before.GetResourceVersion() != after.GetResourceVersion() {
			t.Errorf("the PolicyReport was rewritten (%s to %s) to restore its copy", before.GetResourceVersion(), after.GetResourceVersion())
		}

		// The fixed Pod's results change in both.
		patch := []byte(`{"metadata":{"labels":{"team":"web"}},"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}`)
		if _, err := e.cs.CoreV1().Pods("reports-test").Patch(e.ctx, "web", "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, api := range []policyreport.API{policyreport.WGPolicyK8s, policyreport.OpenReports} {
			e.wantResultsIn(api, "the fixed Pod's report in "+string(api), "reports-test", podUID,
				"admission-only/created-by=fail", "disallow-latest/no-latest=pass", "require-team/team-label=pass")
		}

		// The Pod goes: its report goes from both APIs.
		if err := e.cs.CoreV1().Pods("reports-test").Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, api := range []policyreport.API{policyreport.WGPolicyK8s, policyreport.OpenReports} {
			e.eventually("the deleted Pod's report gone from "+string(api), func() error {
				got, _, err := e.resultsIn(api, "reports-test", podUID)
				if err != nil {
					return err
				}
				if got != nil {
					return fmt.Errorf("still there: %v", got)
				}
				return nil
			})
		}
	})
}
