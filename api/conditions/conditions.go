// Package conditions holds the status-condition helpers every charter
// controller uses, in the manner of Flux's runtime/conditions: Ready,
// Reconciling and Stalled (kstatus' abnormal-true polarity), each written
// with the generation it speaks for. A controller says what happened
// (MarkReady, MarkReconciling, MarkRetrying, MarkStalled); the helper
// keeps the three conditions consistent with each other. The
// policies.kyverno.io kinds keep Kyverno's status.conditionStatus shape,
// whose ready and message summarise the conditions: SetSummarized and
// DeleteSummarized write those.
package conditions

import (
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The condition types, as Flux and kstatus name them.
const (
	// Ready is True when the object's current generation is served.
	Ready = "Ready"
	// Reconciling is True while work on the object is in progress or
	// waits for a retry.
	Reconciling = "Reconciling"
	// Stalled is True when no retry will help until the object (or what
	// it names) changes.
	Stalled = "Stalled"
)

// Set writes one condition for generation: Kubernetes' SetStatusCondition,
// which moves lastTransitionTime only when the status changes.
func Set(conds *[]metav1.Condition, generation int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	apimeta.SetStatusCondition(conds, metav1.Condition{
		Type:               typ,
		Status:             status,
		Reason:             reason,
		Message:            msg,
		ObservedGeneration: generation,
	})
}

// Delete removes the condition of type typ, if any.
func Delete(conds *[]metav1.Condition, typ string) {
	apimeta.RemoveStatusCondition(conds, typ)
}

// IsTrue reports whether the condition of type typ is True.
func IsTrue(conds []metav1.Condition, typ string) bool {
	return apimeta.IsStatusConditionTrue(conds, typ)
}

// MarkReady: the generation is served in full; nothing is in progress or
// stalled.
func MarkReady(conds *[]metav1.Condition, generation int64, reason, msg string) {
	Set(conds, generation, Ready, metav1.ConditionTrue, reason, msg)
	Delete(conds, Reconciling)
	Delete(conds, Stalled)
}

// MarkReconciling: work on the generation is in progress. Ready becomes
// Unknown unless it is True: what was served stays served meanwhile. A
// Stalled condition stays until the work ends one way or the other.
func MarkReconciling(conds *[]metav1.Condition, generation int64, reason, msg string) {
	Set(conds, generation, Reconciling, metav1.ConditionTrue, reason, msg)
	if !IsTrue(*conds, Ready) {
		Set(conds, generation, Ready, metav1.ConditionUnknown, reason, msg)
	}
}

// MarkRetrying: a failure that may pass by itself (a network or API
// server error): Ready False with reason, still Reconciling with
// retryReason, not Stalled.
func MarkRetrying(conds *[]metav1.Condition, generation int64, reason, retryReason, msg string) {
	Set(conds, generation, Ready, metav1.ConditionFalse, reason, msg)
	Set(conds, generation, Reconciling, metav1.ConditionTrue, retryReason, msg)
	Delete(conds, Stalled)
}

// MarkStalled: the generation cannot be served until the object or what
// it names changes: Ready False and Stalled True with reason, no longer
// Reconciling.
func MarkStalled(conds *[]metav1.Condition, generation int64, reason, msg string) {
	Set(conds, generation, Ready, metav1.ConditionFalse, reason, msg)
	Set(conds, generation, Stalled, metav1.ConditionTrue, reason, msg)
	Delete(conds, Reconciling)
}

// Summary is Kyverno's shape of the conditions of the policies.kyverno.io
// kinds (status.conditionStatus): the conditions, plus ready (every
// condition True) and message (the messages of the others) summarising
// them, which Argo CD's built-in health checks and kubectl's columns
// read. *policiesv1.ConditionStatus is one.
type Summary interface {
	// SummarizedConditions are the conditions the summary is of.
	SummarizedConditions() *[]metav1.Condition
	// SetSummary writes ready and message.
	SetSummary(ready bool, message string)
}

// SetSummarized writes one condition into a Summary, as Set does, and
// summarises ready and message again from every condition: each writer of
// a condition leaves the summary true of the conditions others wrote.
func SetSummarized(s Summary, generation int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	Set(s.SummarizedConditions(), generation, typ, status, reason, msg)
	summarize(s)
}

// DeleteSummarized removes the condition of type typ, if any, and
// summarises again.
func DeleteSummarized(s Summary, typ string) {
	Delete(s.SummarizedConditions(), typ)
	summarize(s)
}

// summarize sets ready (there are conditions and every one is True) and
// message (the messages of those that are not, in order, joined by "; ").
func summarize(s Summary) {
	conds := *s.SummarizedConditions()
	ready := len(conds) > 0
	var msgs []string
	for _, c := range conds {
		if c.Status != metav1.ConditionTrue {
			ready = false
			if c.Message != "" {
				msgs = append(msgs, c.Message)
			}
		}
	}
	s.SetSummary(ready, strings.Join(msgs, "; "))
}
