package reports

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/charter-dev/charter/reconciler/reports/report"
)

// Reports of resources that are gone.
//
// A report is deleted with its resource by the resource's delete event
// (resourceGone) and, in a real cluster, by the garbage collector (the
// report is owned by the resource). Neither covers a resource deleted
// while no controller watched it (the controller was stopped, or its
// informer had not listed yet) on a control plane without a garbage
// collector: its report would stay for good, and the promotion gate would
// keep reading its results. So every sweep (on start, on a policy
// removal, at every full rescan) also asks whether each report's resource
// still exists, with this UID, and deletes the report when it does not.
//
// The answer comes only from a watcher whose informer has synced and
// whose first scan is done: a resource the informer does not hold with
// the report's UID is then looked up with a live GET, and only a NotFound
// or another UID (deleted and recreated under the same name) deletes the
// report. Reports seen before that are kept aside and answered right
// after the watcher's first scan (collectDeferred). A report younger than
// Options.GoneGracePeriod is looked at again once it is that old: the
// admission writer may have written it for a CREATE the API server has
// not stored yet. Reports of kinds no watcher scans are left to the
// garbage collector and to the sweep's pruning of removed policies'
// results, as before.

// resourceGoneFor reports whether the resource a report describes no
// longer exists (or exists under another UID), so that the report goes
// now. It answers false whenever it cannot be sure yet.
func (c *Controller) resourceGoneFor(ctx context.Context, seen seenReport) bool {
	w := c.watcherFor(seen.scope)
	if w == nil || !w.deferUnlessReady(seen) {
		return false
	}
	return c.goneNow(ctx, w, seen)
}

// goneNow reports whether the report's resource is gone and the report
// old enough to delete; a young report of a missing resource is queued to
// be looked at again once it is old enough.
func (c *Controller) goneNow(ctx context.Context, w *watcher, seen seenReport) bool {
	if !c.confirmGone(ctx, w, seen.scope) {
		return false
	}
	if wait := c.opts.GoneGracePeriod - c.now().Sub(seen.created); wait > 0 {
		c.events.AddAfter(eventKey{gvr: w.t.GVR, namespace: seen.scope.Namespace, name: seen.scope.Name, recheck: seen.scope.UID}, wait)
		return false
	}
	return true
}

// recheckGone deletes the report of a resource found gone while the
// report was young, if it is still gone.
func (c *Controller) recheckGone(ctx context.Context, key eventKey) error {
	c.mu.Lock()
	w := c.watchers[key.gvr]
	c.mu.Unlock()
	if w == nil {
		return nil // no longer scanned
	}
	scope := report.Scope{APIVersion: w.t.APIVersion(), Kind: w.t.Kind, Namespace: key.namespace, Name: key.name, UID: key.recheck}
	if !c.confirmGone(ctx, w, scope) {
		return nil
	}
	if err := c.resourceGone(ctx, scope); err != nil {
		return err
	}
	c.log.Info("deleted the report of a resource that is gone", "report", scope.String())
	return nil
}

// confirmGone asks the synced informer, then the API server, whether the
// resource is gone.
func (c *Controller) confirmGone(ctx context.Context, w *watcher, scope report.Scope) bool {
	key := scope.Name
	if scope.Namespace != "" {
		key = scope.Namespace + "/" + key
	}
	if item, ok, _ := w.informer.GetStore().GetByKey(key); ok {
		if m, ok := item.(*metav1.PartialObjectMetadata); ok && m.UID == scope.UID {
			return false
		}
	}
	// The informer may not have seen a resource created a moment ago (its
	// report written by admission already): only the API server decides.
	m, err := c.meta.Resource(w.t.GVR).Namespace(scope.Namespace).Get(ctx, scope.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true
	case err != nil:
		if ctx.Err() == nil {
			c.log.Error(err, "looking up the resource of a report; keeping the report", "report", scope.String())
		}
		return false
	}
	return m.UID != scope.UID
}

// watcherFor returns the watcher of the report's resource type, or nil
// when the type is not scanned.
func (c *Controller) watcherFor(scope report.Scope) *watcher {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.watchers {
		if w.t.Kind == scope.Kind && w.t.APIVersion() == scope.APIVersion && w.t.Namespaced == (scope.Namespace != "") {
			return w
		}
	}
	return nil
}

// deferUnlessReady reports whether the watcher can answer for the
// report's resource now; until its first scan is done it keeps the report
// aside for collectDeferred and answers false.
func (w *watcher) deferUnlessReady(seen seenReport) bool {
	w.deferredMu.Lock()
	defer w.deferredMu.Unlock()
	if w.ready {
		return true
	}
	if w.deferred == nil {
		w.deferred = map[types.UID]seenReport{}
	}
	w.deferred[seen.scope.UID] = seen
	return false
}

// collectDeferred runs once the watcher's informer has synced and its
// first scan is done: the reports kept aside until then are deleted when
// their resource is gone, and from then on the watcher answers at once.
func (c *Controller) collectDeferred(ctx context.Context, w *watcher) {
	w.deferredMu.Lock()
	deferred := w.deferred
	w.deferred, w.ready = nil, true
	w.deferredMu.Unlock()
	for _, seen := range deferred {
		if !c.goneNow(ctx, w, seen) {
			continue
		}
		if err := c.resourceGone(ctx, seen.scope); err != nil {
			if ctx.Err() == nil {
				c.log.Error(err, "deleting the report of a resource that is gone", "report", seen.scope.String())
			}
			continue
		}
		c.log.Info("deleted the report of a resource that is gone", "report", seen.scope.String())
	}
}
