package gitsync

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/charter-dev/charter/api/conditions"
	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// reasonProgressingWithRetry marks Reconciling while a failed attempt waits
// for its retry.
const reasonProgressingWithRetry = "ProgressingWithRetry"

func setCondition(obj *gitopsv1alpha1.PolicyRepository, typ string, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(&obj.Status.Conditions, obj.Generation, typ, status, reason, msg)
}

// markProgressing says a revision is being fetched or applied.
func markProgressing(obj *gitopsv1alpha1.PolicyRepository, msg string) {
	conditions.MarkReconciling(&obj.Status.Conditions, obj.Generation, gitopsv1alpha1.ReasonProgressing, msg)
}

// markReady records a revision applied in full.
func markReady(obj *gitopsv1alpha1.PolicyRepository, msg string) {
	conditions.MarkReady(&obj.Status.Conditions, obj.Generation, gitopsv1alpha1.ReasonSucceeded, msg)
}

// markRetrying records a failure that may pass by itself (network, API
// server): Ready False, still Reconciling.
func markRetrying(obj *gitopsv1alpha1.PolicyRepository, reason, msg string) {
	conditions.MarkRetrying(&obj.Status.Conditions, obj.Generation, reason, reasonProgressingWithRetry, msg)
}

// markStalled records a revision that cannot apply until the repository
// or the spec changes.
func markStalled(obj *gitopsv1alpha1.PolicyRepository, reason, msg string) {
	conditions.MarkStalled(&obj.Status.Conditions, obj.Generation, reason, msg)
}

// stalledOnContent reports whether obj is stalled by what its last
// attempted commit or artifact contains (it does not build, it is over the
// limits, an artifact charter does not extract, or an object in it is
// invalid): a fault that stays until the repository or the spec changes.
// A failed signature check is not one of them: the keys may change.
func stalledOnContent(obj *gitopsv1alpha1.PolicyRepository) bool {
	c := apimeta.FindStatusCondition(obj.Status.Conditions, gitopsv1alpha1.ConditionStalled)
	return c != nil && c.Status == metav1.ConditionTrue &&
		(c.Reason == gitopsv1alpha1.ReasonBuildFailed || c.Reason == gitopsv1alpha1.ReasonValidationFailed ||
			c.Reason == gitopsv1alpha1.ReasonLimitExceeded || c.Reason == gitopsv1alpha1.ReasonArtifactInvalid)
}

func removeCondition(obj *gitopsv1alpha1.PolicyRepository, typ string) {
	conditions.Delete(&obj.Status.Conditions, typ)
}
