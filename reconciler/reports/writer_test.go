package reports

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// TestConditionalWrites checks the one guarantee every writer of a report
// relies on: a write based on a report that changed since it was read
// fails with errConflict instead of overwriting it.
func TestConditionalWrites(t *testing.T) {
	e := startEnv(t)
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "writes"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cl, err := newClients(e.cfg, 50, 100)
	if err != nil {
		t.Fatal(err)
	}
	rc := cl.reports
	result := func(policy, outcome string) []v1alpha2.PolicyReportResult {
		return []v1alpha2.PolicyReportResult{{Source: report.Source, Policy: policy, Rule: "r", Result: v1alpha2.PolicyResult(outcome)}}
	}

	for _, scope := range []report.Scope{
		{APIVersion: "v1", Kind: "ConfigMap", Namespace: "writes", Name: "cm", UID: types.UID("0d1c7a52-0000-4000-8000-000000000001")},
		{APIVersion: "v1", Kind: "Namespace", Name: "writes", UID: types.UID("0d1c7a52-0000-4000-8000-000000000002")},
	} {
		t.Run(scope.ReportKind(), func(t *testing.T) {
			rv1, err := rc.write(e.ctx, scope, result("a", "pass"), "")
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if _, err := rc.write(e.ctx, scope, result("b", "pass"), ""); !errors.Is(err, errConflict) {
				t.Errorf("a second create: %v, want errConflict", err)
			}
			rv2, err := rc.write(e.ctx, scope, result("a", "fail"), rv1)
			if err != nil || rv2 == rv1 {
				t.Fatalf("update at the version read: rv %q, %v", rv2, err)
			}
			if _, err := rc.write(e.ctx, scope, result("c", "pass"), rv1); !errors.Is(err, errConflict) {
				t.Errorf("update at an older version: %v, want errConflict", err)
			}
			if _, err := rc.write(e.ctx, scope, nil, rv1); !errors.Is(err, errConflict) {
				t.Errorf("delete at an older version: %v, want errConflict", err)
			}
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
			if _, err := rc.write(e.ctx, scope, result("a", "pass"), rv2); !errors.Is(err, errConflict) {
				t.Errorf("update of a deleted report: %v, want errConflict", err)
			}
		})
	}
}
