package background

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/api/conditions"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// The condition the background controller writes on a policy whose
// generate or mutate-existing writes RBAC forbids. Kyverno never writes
// policy status from its background controller; "generate does nothing"
// with no trace is its most reported complaint (background-cleanup.md
// §5.4), so charter names the missing permission where `kubectl describe`
// and GitOps tools look.
const (
	// ConditionBackground is False (ReasonForbidden) while some write of
	// the policy's rules is forbidden, naming the verb, group, kind and
	// namespaces; True (ReasonPermitted) once the writes that failed went
	// through. Policies that never hit a forbidden write do not get it.
	// The policies.kyverno.io kinds get it as Kyverno's
	// RBACPermissionsGranted, in status.conditionStatus.
	ConditionBackground = "Background"
	// ReasonForbidden: charter's background controller lacks a permission
	// the policy's rules need.
	ReasonForbidden = "Forbidden"
	// ReasonPermitted: the writes that were forbidden went through.
	ReasonPermitted = "Permitted"
)

// maxFaultTriggers bounds the triggers whose forbidden writes are kept per
// policy: the condition needs only a few to name what is missing.
const maxFaultTriggers = 1000

// statusInterval is how often the leader writes the conditions that
// changed, so that a burst of failures makes one write per policy.
const statusInterval = time.Second

// faultKey is one rule run: a rule for a trigger.
type faultKey struct {
	rule    string
	trigger string
}

// permissionFaults are the forbidden writes of each policy's latest rule
// runs, per rule and trigger: a run that succeeds clears its own.
type permissionFaults struct {
	mu       sync.Mutex
	byPolicy map[string]map[faultKey][]*ForbiddenError
	// recovered are policies whose faults all cleared and whose condition
	// is still to be turned True.
	recovered map[string]bool
	dirty     map[string]bool
}

func newPermissionFaults() *permissionFaults {
	return &permissionFaults{byPolicy: map[string]map[faultKey][]*ForbiddenError{}, recovered: map[string]bool{}, dirty: map[string]bool{}}
}

// record keeps the forbidden writes of a work item's run, replacing those
// of its previous run.
func (f *permissionFaults) record(w workItem, err error) {
	faults := forbiddenErrors(err)
	key := faultKey{rule: w.rule, trigger: w.trigger.key()}
	f.mu.Lock()
	defer f.mu.Unlock()
	byKey := f.byPolicy[w.policy]
	if len(faults) == 0 {
		if _, ok := byKey[key]; !ok {
			return
		}
		delete(byKey, key)
		if len(byKey) == 0 {
			delete(f.byPolicy, w.policy)
			f.recovered[w.policy] = true
		}
		f.dirty[w.policy] = true
		return
	}
	if byKey == nil {
		byKey = map[faultKey][]*ForbiddenError{}
		f.byPolicy[w.policy] = byKey
	}
	if _, ok := byKey[key]; !ok && len(byKey) >= maxFaultTriggers {
		return
	}
	byKey[key] = faults
	delete(f.recovered, w.policy)
	f.dirty[w.policy] = true
}

// forget drops the faults of policies no longer installed.
func (f *permissionFaults) forget(installed map[string]kyvernov1.PolicyInterface) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key := range f.byPolicy {
		if _, ok := installed[key]; !ok {
			delete(f.byPolicy, key)
			delete(f.dirty, key)
		}
	}
	for key := range f.recovered {
		if _, ok := installed[key]; !ok {
			delete(f.recovered, key)
		}
	}
}

// takeDirty returns the policies whose condition may have to change, and
// forgets them.
func (f *permissionFaults) takeDirty() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Sorted(maps.Keys(f.dirty))
	clear(f.dirty)
	return out
}

// markDirty asks for a policy's condition to be checked again.
func (f *permissionFaults) markDirty(keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		f.dirty[k] = true
	}
}

// tracked are the policies with faults or a recovery to write.
func (f *permissionFaults) tracked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Collect(maps.Keys(f.byPolicy))
	return append(out, slices.Collect(maps.Keys(f.recovered))...)
}

// condition is the Background condition a policy should carry, and false
// when it needs none.
func (f *permissionFaults) condition(policy string) (metav1.Condition, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if byKey := f.byPolicy[policy]; len(byKey) > 0 {
		return metav1.Condition{Type: ConditionBackground, Status: metav1.ConditionFalse, Reason: ReasonForbidden, Message: forbiddenMessage(byKey)}, true
	}
	if f.recovered[policy] {
		return metav1.Condition{Type: ConditionBackground, Status: metav1.ConditionTrue, Reason: ReasonPermitted,
			Message: "the writes of the policy's generate and mutate-existing rules that were forbidden went through"}, true
	}
	return metav1.Condition{}, false
}

// wrote forgets a recovery once its condition is written.
func (f *permissionFaults) wrote(policy string, c metav1.Condition) {
	if c.Status != metav1.ConditionTrue {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, faulty := f.byPolicy[policy]; !faulty {
		delete(f.recovered, policy)
	}
}

// forbiddenMessage names each missing permission once, with the rules and
// namespaces that need it, e.g. `rule quota: may not create ResourceQuota
// (group core, resource resourcequotas) in namespaces a, b and 3 more`.
//
// A namespaced policy's writes are refused to its ServiceAccount, not to
// charter: those are told apart, naming the ServiceAccount.
func forbiddenMessage(byKey map[faultKey][]*ForbiddenError) string {
	type permission struct {
		rule, verb, group, resource, kind string
		serviceAccount                    string
		missing                           bool
	}
	namespaces := map[permission]map[string]bool{}
	for key, faults := range byKey {
		for _, fe := range faults {
			p := permission{key.rule, fe.Verb, fe.Group, fe.Resource, fe.Kind, fe.ServiceAccount, fe.MissingServiceAccount}
			if namespaces[p] == nil {
				namespaces[p] = map[string]bool{}
			}
			namespaces[p][fe.Namespace] = true
		}
	}
	perms := slices.SortedFunc(maps.Keys(namespaces), func(a, b permission) int {
		return strings.Compare(a.rule+a.verb+a.group+a.resource, b.rule+b.verb+b.group+b.resource)
	})
	var charters []string
	var accounts []string
	for _, p := range perms {
		group := p.group
		if group == "" {
			group = "core"
		}
		what := fmt.Sprintf("%s %s (group %s, resource %s) %s", p.verb, p.kind, group, p.resource, where(slices.Sorted(maps.Keys(namespaces[p]))))
		if p.serviceAccount == "" {
			charters = append(charters, fmt.Sprintf("rule %s: may not %s", p.rule, what))
			continue
		}
		accounts = append(accounts, fmt.Sprintf("rule %s: %s %s; %s", p.rule, serviceAccountSubject(p.serviceAccount, p.missing), what, serviceAccountHint(p.serviceAccount, p.missing)))
	}
	var out []string
	if len(charters) > 0 {
		out = append(out, fmt.Sprintf("charter's background controller %s; grant it with a ClusterRole labelled %s: \"true\"",
			strings.Join(charters, "; "), AggregateLabel))
	}
	out = append(out, accounts...)
	return "forbidden: " + strings.Join(out, "; ")
}

// where names up to three namespaces ("" is cluster-wide).
func where(namespaces []string) string {
	const shown = 3
	if len(namespaces) == 1 && namespaces[0] == "" {
		return "cluster-wide"
	}
	word := "in namespace "
	if len(namespaces) > 1 {
		word = "in namespaces "
	}
	if len(namespaces) <= shown {
		return word + strings.Join(namespaces, ", ")
	}
	return fmt.Sprintf("%s%s and %d more", word, strings.Join(namespaces[:shown], ", "), len(namespaces)-shown)
}

// forbiddenErrors collects every *ForbiddenError of an error tree.
func forbiddenErrors(err error) []*ForbiddenError {
	var out []*ForbiddenError
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if fe, ok := e.(*ForbiddenError); ok {
			out = append(out, fe)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// writeStatuses writes the Background condition of the policies whose
// faults changed, every statusInterval, until ctx ends.
func (r *run) writeStatuses(ctx context.Context) {
	t := time.NewTicker(statusInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, key := range r.c.faults.takeDirty() {
			if err := r.c.writeCondition(ctx, key); err != nil && ctx.Err() == nil {
				r.c.log.V(1).Info("writing the policy's Background condition; retrying", "policy", key, "error", err.Error())
				r.c.faults.markDirty(key)
			}
		}
	}
}

// writeCondition brings a policy's Background condition in line with its
// faults: on a ClusterPolicy or Policy the Background condition, on a
// policies.kyverno.io policy Kyverno's RBACPermissionsGranted in
// status.conditionStatus (its ready and message summarised again). The
// write is a merge patch of the status conditional on the resourceVersion
// read, so it never drops a condition another controller (the policy
// status controller's Ready or PolicyCached) wrote meanwhile.
func (c *Controller) writeCondition(ctx context.Context, key string) error {
	want, ok := c.faults.condition(key)
	if !ok {
		return nil
	}
	obj := statusObject(key)
	if err := c.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	var current []metav1.Condition
	set := func(metav1.Condition) {}
	switch p := obj.(type) {
	case policiesv1.StatusHolder:
		want.Type = policiesv1.ConditionRBACPermissionsGranted
		cs := &p.GetStatus().ConditionStatus
		current = cs.Conditions
		set = func(c metav1.Condition) {
			conditions.SetSummarized(cs, c.ObservedGeneration, c.Type, c.Status, c.Reason, c.Message)
		}
	case kyvernov1.StatusHolder:
		st := p.GetStatus()
		current = st.Conditions
		set = func(c metav1.Condition) {
			conditions.Set(&st.Conditions, c.ObservedGeneration, c.Type, c.Status, c.Reason, c.Message)
		}
	default:
		return fmt.Errorf("%s %s: no status to write the %s condition into", obj.GetKind(), key, want.Type)
	}
	cur := meta.FindStatusCondition(current, want.Type)
	switch {
	case want.Status == metav1.ConditionTrue && (cur == nil || cur.Status == metav1.ConditionTrue):
		// Nothing was ever said, or the recovery already was.
		c.faults.wrote(key, want)
		return nil
	case cur != nil && cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message:
		c.faults.wrote(key, want)
		return nil
	}
	orig := obj.DeepCopyObject().(client.Object)
	want.ObservedGeneration = obj.GetGeneration()
	set(want)
	if err := c.client.Status().Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	c.faults.wrote(key, want)
	return nil
}
