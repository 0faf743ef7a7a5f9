package reports

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// TestConditionalWrites checks the one guarantee every writer of a report
// relies on: a write based on a report that changed since it was read
// fails with errConflict instead of overwriting it. It holds in each
// --reports-api: the condition is on the primary report, and with both,
// the OpenReports copy follows every write, delete included.
func TestConditionalWrites(t *testing.T) {
	e := startEnv(t)
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "writes"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	result := func(policy, outcome string) []v1alpha2.PolicyReportResult {
		return []v1alpha2.PolicyReportResult{{Source: report.Source, Policy: policy, Rule: "r", Result: v1alpha2.PolicyResult(outcome)}}
	}
	for i, selection := range []string{"wgpolicyk8s", "openreports", "both"} {
		apis, err := policyreport.ParseAPIs(selection)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := newClients(e.cfg, 50, 100, apis, "", logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		rc := cl.reports
		// stored says what each API holds: the primary's results, or
		// nothing in an API not selected.
		stored := func(t *testing.T, scope report.Scope, want string) {
			t.Helper()
			for _, api := range []policyreport.API{policyreport.WGPolicyK8s, policyreport.OpenReports} {
				wantHere := ""
				if slices.Contains(apis, api) {
					wantHere = want
				}
				got, _, err := e.resultsIn(api, scope.Namespace, string(scope.UID))
				if err != nil {
					t.Fatal(err)
				}
				if strings.Join(got, " ") != wantHere {
					t.Errorf("%s of %s: %q, want %q", scope.ReportKind(api), scope, got, wantHere)
				}
			}
		}
		for _, scope := range []report.Scope{
			{APIVersion: "v1", Kind: "ConfigMap", Namespace: "writes", Name: "cm", UID: types.UID(fmt.Sprintf("0d1c7a52-0000-4000-8000-0000000000%d%d", i, 1))},
			{APIVersion: "v1", Kind: "Namespace", Name: "writes", UID: types.UID(fmt.Sprintf("0d1c7a52-0000-4000-8000-0000000000%d%d", i, 2))},
		} {
			t.Run(selection+"/"+scope.ReportKind(apis[0]), func(t *testing.T) {
				rv1, err := rc.write(e.ctx, scope, result("a", "pass"), "")
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				stored(t, scope, "a/r=pass")
				if _, err := rc.write(e.ctx, scope, result("b", "pass"), ""); !errors.Is(err, errConflict) {
					t.Errorf("a second create: %v, want errConflict", err)
				}
				rv2, err := rc.write(e.ctx, scope, result("a", "fail"), rv1)
				if err != nil || rv2 == rv1 {
					t.Fatalf("update at the version read: rv %q, %v", rv2, err)
				}
				stored(t, scope, "a/r=fail")
				if _, err := rc.write(e.ctx, scope, result("c", "pass"), rv1); !errors.Is(err, errConflict) {
					t.Errorf("update at an older version: %v, want errConflict", err)
				}
				if _, err := rc.write(e.ctx, scope, nil, rv1); !errors.Is(err, errConflict) {
					t.Errorf("delete at an older version: %v, want errConflict", err)
				}
				stored(t, scope, "a/r=fail")
				got, rv, found, err := rc.get(e.ctx, scope)
				if err != nil || !found || rv != rv2 || len(got) != 1 || got[0].Policy != "a" || got[0].Result != "fail" {
					t.Fatalf("stored report: %+v at %q (found %v, %v), want a=fail at %q", got, rv, found, err, rv2)
				}
				if _, err := rc.write(e.ctx, scope, nil, rv2); err != nil {
					t.Fatalf("delete at the version read: %v", err)
				}
				if _, _, found, err := rc.get(e.ctx, scope); err != nil || found {
					t.Fatalf("report still there after its delete (%v)", err)
				}
				stored(t, scope, "")
				if _, err := rc.write(e.ctx, scope, result("a", "pass"), rv2); !errors.Is(err, errConflict) {
					t.Errorf("update of a deleted report: %v, want errConflict", err)
				}
				// A resource gone: its report goes from every API.
				if _, err := rc.write(e.ctx, scope, result("a", "pass"), ""); err != nil {
					t.Fatal(err)
				}
				if err := rc.delete(e.ctx, scope); err != nil {
					t.Fatal(err)
				}
				stored(t, scope, "")
			})
		}
	}
}
