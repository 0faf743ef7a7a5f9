package policycache

import (
	"k8s.io/apimachinery/pkg/api/equality"
	toolscache "k8s.io/client-go/tools/cache"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// PolicyChange is what happened to a ClusterPolicy or Policy, in the words
// of kyverno_policy_changes_total's policy_change_type label.
type PolicyChange string

// Policy changes.
const (
	PolicyCreated PolicyChange = "created"
	PolicyUpdated PolicyChange = "updated"
	PolicyDeleted PolicyChange = "deleted"
)

// OnPolicyChange registers fn to be called for every ClusterPolicy and
// Policy change the cache's informers deliver, as Kyverno counts them
// (admission-reports.md §4): created, for new policies and for each
// policy of the informers' initial list; updated, only when the spec
// changed (status writes and label edits are not); deleted. fn runs on
// the informer's goroutine and must not block. Register before Start.
func (c *Cache) OnPolicyChange(fn func(kyvernov1.PolicyInterface, PolicyChange)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changeListeners = append(c.changeListeners, fn)
}

// policyChanged hands a policy change to the listeners. Objects that are
// not policies (a tombstone's unknown content) are ignored.
func (c *Cache) policyChanged(obj any, change PolicyChange) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	p, ok := obj.(kyvernov1.PolicyInterface)
	if !ok {
		return
	}
	c.mu.Lock()
	listeners := c.changeListeners
	c.mu.Unlock()
	for _, fn := range listeners {
		fn(p, change)
	}
}

// policyUpdated reports an update as a change when the spec changed.
func (c *Cache) policyUpdated(oldObj, newObj any) {
	o, ok1 := oldObj.(kyvernov1.PolicyInterface)
	n, ok2 := newObj.(kyvernov1.PolicyInterface)
	if !ok1 || !ok2 || !specChanged(o, n) {
		return
	}
	c.policyChanged(n, PolicyUpdated)
}

// specChanged reports whether an update changed the policy's spec. The API
// server bumps a custom resource's generation on every change outside
// metadata and status, so an unchanged generation means an unchanged
// spec; a changed one may also come from metadata (a deletion timestamp),
// so the specs are compared then.
func specChanged(o, n kyvernov1.PolicyInterface) bool {
	if g := o.GetGeneration(); g != 0 && g == n.GetGeneration() {
		return false
	}
	return !equality.Semantic.DeepEqual(o.GetSpec(), n.GetSpec())
}
