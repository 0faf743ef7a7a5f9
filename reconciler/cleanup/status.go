package cleanup

import (
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/charter-dev/charter/api/conditions"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// decision is what the controller decided about a policy's generation,
// written into its status in the shape of its kind.
type decision int

const (
	// decidedScheduled: the policy compiled and waits for its next run.
	decidedScheduled decision = iota
	// decidedInvalid: the policy does not compile.
	decidedInvalid
	// decidedRunFailed: the due run failed.
	decidedRunFailed
	// decidedRan: the due run went through.
	decidedRan
)

// statusUpdate is one decision with what it says.
type statusUpdate struct {
	decision decision
	// msg says it: the next run, the compile error, the run's outcome.
	msg string
	// ran is when the run that went through started (decidedRan).
	ran time.Time
	// runErr is the failed run's error (decidedRunFailed).
	runErr error
}

// policyStatus is a cleanup policy's status as the controller reads and
// writes it: Ready among plain conditions for the kyverno.io kinds,
// status.conditionStatus for the DeletingPolicy kinds, as Kyverno has it.
type policyStatus interface {
	// lastExecution is when the policy last ran through, or nil.
	lastExecution() *metav1.Time
	// decidedAt reports whether the status already says the generation
	// is scheduled (or ran).
	decidedAt(generation int64) bool
	// apply writes the update for the generation.
	apply(generation int64, u statusUpdate)
}

// statusOf returns the status of p to read and write in place.
func statusOf(p kyvernov2.CleanupPolicyInterface) (policyStatus, error) {
	switch p := p.(type) {
	case policiesv1.DeletingPolicyLike:
		return deletingStatus{p.GetStatus()}, nil
	case kyvernov2.CleanupStatusHolder:
		return cleanupStatus{p.GetStatus()}, nil
	}
	return nil, fmt.Errorf("%T has no status the cleanup controller knows", p)
}

// cleanupStatus is a CleanupPolicy's or ClusterCleanupPolicy's: Ready and
// Stalled, and lastExecutionTime.
type cleanupStatus struct {
	st *kyvernov2.CleanupPolicyStatus
}

func (s cleanupStatus) lastExecution() *metav1.Time { return s.st.LastExecutionTime }

func (s cleanupStatus) decidedAt(generation int64) bool {
	ready := apimeta.FindStatusCondition(s.st.Conditions, ConditionReady)
	return ready != nil && ready.ObservedGeneration == generation
}

// apply writes Ready, and Stalled only while the policy is stalled (an
// invalid spec: no retry helps until it changes), as Flux and kstatus
// read it: an abnormal-true condition, absent when not True.
func (s cleanupStatus) apply(generation int64, u statusUpdate) {
	switch u.decision {
	case decidedInvalid:
		conditions.MarkStalled(&s.st.Conditions, generation, ReasonInvalidPolicy, u.msg)
	case decidedRunFailed:
		// The run is retried with backoff: failed, not stalled.
		conditions.Set(&s.st.Conditions, generation, ConditionReady, metav1.ConditionFalse, ReasonRunFailed, u.msg)
		conditions.Delete(&s.st.Conditions, ConditionStalled)
	case decidedRan:
		t := metav1.NewTime(u.ran)
		s.st.LastExecutionTime = &t
		conditions.MarkReady(&s.st.Conditions, generation, ReasonSucceeded, u.msg)
	default:
		conditions.MarkReady(&s.st.Conditions, generation, ReasonScheduled, u.msg)
	}
}

// deletingStatus is a DeletingPolicy's or NamespacedDeletingPolicy's, in
// Kyverno's shape: status.conditionStatus with PolicyCached (the policy
// compiled and is scheduled), RBACPermissionsGranted (after a run: its
// lists and deletes were not forbidden) and charter's Executed (the
// latest run went through), each about the generation decided; ready is
// true when all are True, so Argo CD's built-in check says Degraded with
// the failing condition's message, and Progressing while a condition is
// about an older generation.
type deletingStatus struct {
	st *policiesv1.DeletingPolicyStatus
}

func (s deletingStatus) lastExecution() *metav1.Time { return s.st.LastExecutionTime }

func (s deletingStatus) decidedAt(generation int64) bool {
	c := apimeta.FindStatusCondition(s.st.ConditionStatus.Conditions, policiesv1.ConditionPolicyCached)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation
}

func (s deletingStatus) apply(generation int64, u statusUpdate) {
	cs := &s.st.ConditionStatus
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		conditions.SetSummarized(cs, generation, typ, status, reason, msg)
	}
	if u.decision == decidedInvalid {
		set(policiesv1.ConditionPolicyCached, metav1.ConditionFalse, ReasonInvalidPolicy, u.msg)
	} else {
		set(policiesv1.ConditionPolicyCached, metav1.ConditionTrue, policiesv1.ReasonSucceeded, u.msg)
	}
	switch u.decision {
	case decidedRunFailed:
		set(policiesv1.ConditionExecuted, metav1.ConditionFalse, ReasonRunFailed, u.msg)
		if forbidden := forbiddenMessages(u.runErr); len(forbidden) > 0 {
			set(policiesv1.ConditionRBACPermissionsGranted, metav1.ConditionFalse, ReasonForbidden, strings.Join(forbidden, "; "))
		}
	case decidedRan:
		set(policiesv1.ConditionExecuted, metav1.ConditionTrue, policiesv1.ReasonSucceeded, u.msg)
		set(policiesv1.ConditionRBACPermissionsGranted, metav1.ConditionTrue, policiesv1.ReasonSucceeded, "the run's lists and deletes were permitted")
		t := metav1.NewTime(u.ran)
		s.st.LastExecutionTime = &t
	}
	// A condition about an older generation that this decision did not
	// renew says nothing of the policy as it is now; Argo CD would wait
	// on it forever.
	for _, c := range append([]metav1.Condition(nil), cs.Conditions...) {
		if c.ObservedGeneration < generation {
			conditions.DeleteSummarized(cs, c.Type)
		}
	}
}

// ReasonForbidden is the reason of a False RBACPermissionsGranted: the
// API server refused a list or delete of the run (for a namespaced
// policy, made as its namespace's ServiceAccount).
const ReasonForbidden = "Forbidden"

// forbiddenMessages returns the messages of the errors of a run that the
// API server refused as forbidden.
func forbiddenMessages(err error) []string {
	if err == nil {
		return nil
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range joined.Unwrap() {
			out = append(out, forbiddenMessages(e)...)
		}
		return out
	}
	if apierrors.IsForbidden(err) {
		return []string{err.Error()}
	}
	return nil
}
