package cleanup

import (
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// TestCleanupStatusStalledOnlyWhenStalled: a cleanup policy's Stalled
// condition is there, True, while its spec is invalid, and gone once a
// decision is anything else, as Flux and kstatus read it.
func TestCleanupStatusStalledOnlyWhenStalled(t *testing.T) {
	st := &kyvernov2.CleanupPolicyStatus{}
	s := cleanupStatus{st}
	for _, step := range []struct {
		u           statusUpdate
		ready       metav1.ConditionStatus
		reason      string
		wantStalled bool
	}{
		{statusUpdate{decision: decidedInvalid, msg: "spec.schedule: bad"}, metav1.ConditionFalse, ReasonInvalidPolicy, true},
		{statusUpdate{decision: decidedScheduled, msg: "next run"}, metav1.ConditionTrue, ReasonScheduled, false},
		{statusUpdate{decision: decidedRunFailed, msg: "forbidden"}, metav1.ConditionFalse, ReasonRunFailed, false},
		{statusUpdate{decision: decidedRan, msg: "deleted 1", ran: time.Unix(100, 0)}, metav1.ConditionTrue, ReasonSucceeded, false},
	} {
		s.apply(2, step.u)
		ready := apimeta.FindStatusCondition(st.Conditions, ConditionReady)
		if ready == nil || ready.Status != step.ready || ready.Reason != step.reason || ready.ObservedGeneration != 2 {
			t.Errorf("after %v: Ready %+v, want %s/%s", step.u.decision, ready, step.ready, step.reason)
		}
		stalled := apimeta.FindStatusCondition(st.Conditions, ConditionStalled)
		if (stalled != nil) != step.wantStalled || stalled != nil && stalled.Status != metav1.ConditionTrue {
			t.Errorf("after %v: Stalled %+v, want present: %v", step.u.decision, stalled, step.wantStalled)
		}
	}
	if st.LastExecutionTime == nil || !st.LastExecutionTime.Time.Equal(time.Unix(100, 0)) {
		t.Errorf("lastExecutionTime %v", st.LastExecutionTime)
	}
}
