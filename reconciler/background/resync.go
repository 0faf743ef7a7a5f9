package background

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
)

// resync goes over every policy as if it had just changed, so that what
// no event told the controller is caught up without a new trigger: a
// downstream object that drifted while no watch saw it, a trigger whose
// admission request never reached charter (the webhook failed open, or
// charter was down), a Failed UpdateRequest whose cause is gone (a
// permission granted, a clone source created). Kyverno's hourly re-sync
// covers only generateExisting and mutateExistingOnPolicyUpdate rules and
// never looks at a failed UpdateRequest again: it has deleted it.
func (r *run) resync(ctx context.Context) {
	c := r.c
	cur := c.compiled.Load()
	c.log.V(1).Info("resync", "policies", len(cur.byID))
	r.policiesChanged(ctx, &compiledPolicies{byID: map[string]kyvernov1.PolicyInterface{}}, cur, cur)
	r.retryFailedUpdateRequests(ctx)
	c.faults.markDirty(c.faults.tracked()...)
}

// retryFailedUpdateRequests gives every Failed UpdateRequest one more
// attempt: done, it is deleted; failed again, it stays Failed with the new
// reason.
func (r *run) retryFailedUpdateRequests(ctx context.Context) {
	var urs kyvernov2.UpdateRequestList
	if err := r.c.reader.List(ctx, &urs, client.InNamespace(r.c.opts.Namespace)); err != nil {
		r.c.log.Error(err, "resync: listing UpdateRequests")
		return
	}
	for i := range urs.Items {
		ur := &urs.Items[i]
		if ur.Status.State != kyvernov2.Failed {
			continue
		}
		key := types.NamespacedName{Namespace: ur.Namespace, Name: ur.Name}
		r.retryFailed.Store(key, true)
		r.urs.Add(key)
	}
}

// createdAfter reports whether an object was created after a policy (in
// the same second counts: timestamps have seconds only): a
// trigger the policy's UpdateRequests should have covered.
func createdAfter(created time.Time, p kyvernov1.PolicyInterface) bool {
	return !created.Before(p.GetCreationTimestamp().Time)
}
