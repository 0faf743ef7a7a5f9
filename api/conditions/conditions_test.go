package conditions

import (
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// want is a condition as a test expects it: "" status means absent.
type want struct {
	status metav1.ConditionStatus
	reason string
}

// TestMarks: each mark, from a start that holds the other conditions,
// leaves Ready, Reconciling and Stalled as kstatus reads them.
func TestMarks(t *testing.T) {
	ready := func(c *[]metav1.Condition) { MarkReady(c, 1, "Succeeded", "ok") }
	stalled := func(c *[]metav1.Condition) { MarkStalled(c, 1, "BuildFailed", "bad") }
	for _, tc := range []struct {
		name                    string
		start                   func(*[]metav1.Condition)
		mark                    func(*[]metav1.Condition)
		ready, reconcile, stall want
	}{
		{"ready after stalled", stalled, func(c *[]metav1.Condition) { MarkReady(c, 2, "Succeeded", "ok") },
			want{metav1.ConditionTrue, "Succeeded"}, want{}, want{}},
		{"reconciling keeps a True Ready", ready, func(c *[]metav1.Condition) { MarkReconciling(c, 2, "Progressing", "fetching") },
			want{metav1.ConditionTrue, "Succeeded"}, want{metav1.ConditionTrue, "Progressing"}, want{}},
		{"reconciling makes a False Ready Unknown and keeps Stalled", stalled, func(c *[]metav1.Condition) { MarkReconciling(c, 2, "Progressing", "fetching") },
			want{metav1.ConditionUnknown, "Progressing"}, want{metav1.ConditionTrue, "Progressing"}, want{metav1.ConditionTrue, "BuildFailed"}},
		{"retrying after stalled", stalled, func(c *[]metav1.Condition) { MarkRetrying(c, 2, "FetchFailed", "ProgressingWithRetry", "no network") },
			want{metav1.ConditionFalse, "FetchFailed"}, want{metav1.ConditionTrue, "ProgressingWithRetry"}, want{}},
		{"stalled while reconciling", func(c *[]metav1.Condition) { MarkReconciling(c, 1, "Progressing", "x") }, func(c *[]metav1.Condition) { MarkStalled(c, 2, "Conflict", "taken") },
			want{metav1.ConditionFalse, "Conflict"}, want{}, want{metav1.ConditionTrue, "Conflict"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conds []metav1.Condition
			tc.start(&conds)
			tc.mark(&conds)
			for typ, w := range map[string]want{Ready: tc.ready, Reconciling: tc.reconcile, Stalled: tc.stall} {
				c := apimeta.FindStatusCondition(conds, typ)
				switch {
				case w.status == "" && c != nil:
					t.Errorf("%s present: %+v", typ, *c)
				case w.status == "":
				case c == nil:
					t.Errorf("%s absent, want %s/%s", typ, w.status, w.reason)
				case c.Status != w.status || c.Reason != w.reason:
					t.Errorf("%s = %s/%s, want %s/%s", typ, c.Status, c.Reason, w.status, w.reason)
				}
			}
			// The mark's own writes speak for its generation.
			if c := apimeta.FindStatusCondition(conds, Reconciling); c != nil && c.ObservedGeneration != 2 {
				t.Errorf("Reconciling written for generation %d, want 2", c.ObservedGeneration)
			}
		})
	}
}

// summary is a Summary as the policies.kyverno.io kinds hold one.
type summary struct {
	conds   []metav1.Condition
	ready   *bool
	message string
}

func (s *summary) SummarizedConditions() *[]metav1.Condition { return &s.conds }
func (s *summary) SetSummary(ready bool, message string)     { s.ready, s.message = &ready, message }

// TestSummarized: ready and message follow every condition, whoever wrote
// it, and a removed condition no longer counts.
func TestSummarized(t *testing.T) {
	s := &summary{}
	SetSummarized(s, 1, "PolicyCached", metav1.ConditionTrue, "Succeeded", "")
	if s.ready == nil || !*s.ready || s.message != "" {
		t.Fatalf("one True condition: ready %v, message %q", s.ready, s.message)
	}
	s.conds = append(s.conds, metav1.Condition{Type: "RBACPermissionsGranted", Status: metav1.ConditionFalse, Message: "forbidden"})
	SetSummarized(s, 1, "Executed", metav1.ConditionFalse, "RunFailed", "run failed")
	if *s.ready || s.message != "forbidden; run failed" {
		t.Errorf("two False conditions: ready %v, message %q", *s.ready, s.message)
	}
	DeleteSummarized(s, "RBACPermissionsGranted")
	DeleteSummarized(s, "Executed")
	if !*s.ready || s.message != "" {
		t.Errorf("after removing the False ones: ready %v, message %q", *s.ready, s.message)
	}
	DeleteSummarized(s, "PolicyCached")
	if *s.ready {
		t.Error("no conditions: ready")
	}
}
