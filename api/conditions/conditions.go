// Package conditions holds the status-condition helpers every charter
// controller uses, in the manner of Flux's runtime/conditions: Ready,
// Reconciling and Stalled (kstatus' abnormal-true polarity), each written
// with the generation it speaks for. A controller says what happened
// (MarkReady, MarkReconciling, MarkRetrying, MarkStalled); the helper
// keeps the three conditions consistent with each other.
package conditions

import (
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
