package reports

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// watcher watches one resource type's metadata and scans it.
type watcher struct {
	t        clusterstate.ResourceType
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
	// scanMu keeps scans of one type from overlapping.
	scanMu sync.Mutex
	// scanned is set when the first scan completed.
	scanned atomic.Bool

	// deferredMu guards ready and deferred: reports whose resource the
	// watcher could not yet answer for (see gone.go).
	deferredMu sync.Mutex
	ready      bool
	deferred   map[types.UID]seenReport
}

// seenReport is a report a sweep met: its resource, and when it was
// created.
type seenReport struct {
	scope   report.Scope
	created time.Time
}

// newMetadataInformer returns a metadata-only informer whose cache keeps
// just what the controller reads: identity and resourceVersion, plus the
// labels when keepLabels (namespaces, for namespaceSelectors).
func newMetadataInformer(client metadata.Interface, gvr schema.GroupVersionResource, keepLabels bool) cache.SharedIndexInformer {
	inf := metadatainformer.NewFilteredMetadataInformer(client, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	_ = inf.SetTransform(func(obj any) (any, error) {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return obj, nil
		}
		slim := &metav1.PartialObjectMetadata{
			TypeMeta: m.TypeMeta,
			ObjectMeta: metav1.ObjectMeta{
				Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
			},
		}
		if keepLabels {
			slim.Labels = m.Labels
		}
		return slim, nil
	})
	return inf
}

// startWatcher starts watching a type; once the informer has synced, the
// whole type is scanned by listing it. The informer's initial adds are
// ignored (the scan covers them); later adds and updates queue the one
// resource, deletes remove its report.
func (c *Controller) startWatcher(ctx context.Context, t clusterstate.ResourceType) *watcher {
	wctx, cancel := context.WithCancel(ctx)
	w := &watcher{t: t, informer: newMetadataInformer(c.meta, t.GVR, false), cancel: cancel}
	_, err := w.informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial {
				c.resourceChanged(t.GVR, obj)
			}
		},
		UpdateFunc: func(_, obj any) { c.resourceChanged(t.GVR, obj) },
		DeleteFunc: func(obj any) { c.resourceDeleted(t.GVR, obj) },
	})
	if err != nil {
		c.log.Error(err, "watching", "resource", t.GVR)
	}
	// What the controller may read comes through an aggregated ClusterRole
	// (config/rbac/README.md): say how to widen it rather than only that
	// the list was refused.
	_ = w.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			c.log.Error(err, "background scans cannot read this kind: grant get, list and watch on it in a ClusterRole labelled rbac.charter.dev/aggregate-to-reports: \"true\"", "resource", t.GVR.String())
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	go w.informer.RunWithContext(wctx)
	go func() {
		watched := time.Now()
		if !cache.WaitForCacheSync(wctx.Done(), w.informer.HasSynced) {
			return
		}
		c.log.V(1).Info("informer synced", "resource", t.GVR.String(), "took", time.Since(watched).String())
		select {
		case <-c.firstSwept:
		case <-wctx.Done():
			return
		}
		if !c.firstScan(wctx, w) {
			return
		}
		c.collectDeferred(wctx, w)
		w.scanned.Store(true)
	}()
	c.log.Info("watching for background scans", "resource", t.GVR.String())
	return w
}

func (w *watcher) stop() { w.cancel() }

// errScanIncomplete marks a scan that did not list every resource of its
// type (the list failed part way): some resources were never evaluated.
var errScanIncomplete = errors.New("the scan did not list every resource")

// firstScan runs a type's first scan until it has listed every resource,
// retrying a scan cut short with a back-off, since nothing else would
// evaluate the resources it never listed (their informer adds are
// ignored) and Synced would report a scan that covered part of the type.
// A resource whose evaluation or report write failed is logged and not
// retried here, as in every scan. It returns false when ctx ends first.
func (c *Controller) firstScan(ctx context.Context, w *watcher) bool {
	backoff := time.Second
	for {
		err := w.scan(ctx, c, false)
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			return true
		}
		c.log.Error(err, "initial background scan", "resource", w.t.GVR)
		if !errors.Is(err, errScanIncomplete) {
			return true
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return false
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (c *Controller) resourceChanged(gvr schema.GroupVersionResource, obj any) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	c.mu.Lock()
	st := c.states[m.UID]
	seen := st != nil && st.evaluated && st.rv == m.ResourceVersion
	c.mu.Unlock()
	if !seen {
		c.events.Add(eventKey{gvr: gvr, namespace: m.Namespace, name: m.Name})
	}
}

func (c *Controller) resourceDeleted(gvr schema.GroupVersionResource, obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	c.events.Add(eventKey{gvr: gvr, namespace: m.Namespace, name: m.Name, deleted: m.UID})
}

// processEvent handles one queued resource event; an error retries it.
func (c *Controller) processEvent(ctx context.Context, key eventKey) (time.Duration, error) {
	err := c.handleEvent(ctx, key)
	if err != nil && ctx.Err() == nil {
		c.log.Error(err, "background scan of one resource", "resource", key.gvr.Resource, "namespace", key.namespace, "name", key.name)
	}
	return 0, err
}

func (c *Controller) handleEvent(ctx context.Context, key eventKey) error {
	if key.deleted != "" {
		return c.resourceGone(ctx, report.Scope{Namespace: key.namespace, Name: key.name, UID: key.deleted})
	}
	if key.recheck != "" {
		return c.recheckGone(ctx, key)
	}
	snap := c.snap.Load()
	entry, ok := snap.types[key.gvr]
	c.mu.Lock()
	w := c.watchers[key.gvr]
	c.mu.Unlock()
	if !ok || w == nil {
		return nil // no longer watched
	}
	var ri = c.scan.Resource(key.gvr).Namespace(key.namespace)
	obj, err := ri.Get(ctx, key.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil // the delete event follows
	}
	if err != nil {
		return err
	}
	// The object may be deleted between the GET and the lock, and its
	// report with it: only an object the informer still holds is
	// reconciled. (Its version may differ: a later change queues it again.)
	return c.reconcileObject(ctx, entry.ResourceType, obj, false, w.present)
}

// resourceGone deletes the report of a deleted resource. In a real cluster
// the garbage collector does it too (the report is owned by the
// resource); doing it here keeps clusters without a controller manager
// clean, and it is idempotent. It deletes even when the controller knows
// of no report: an admission writer on another replica may have written
// one.
func (c *Controller) resourceGone(ctx context.Context, scope report.Scope) error {
	unlock := c.lock(scope.UID)
	defer unlock()
	return c.deleteReportLocked(ctx, scope)
}

// deleteReportLocked deletes a report whatever it holds and forgets the
// resource; the caller holds the resource's lock.
func (c *Controller) deleteReportLocked(ctx context.Context, scope report.Scope) error {
	c.stats.Writes.Add(1)
	if err := c.reports.delete(ctx, scope); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.states, scope.UID)
	c.mu.Unlock()
	return nil
}

// scan lists every resource of the type, a page at a time, and reconciles
// each, with at most Workers evaluations and WriteWorkers writes at once.
// It returns once every resource listed has been reconciled.
// force evaluates resources whose content and policies did not change.
func (w *watcher) scan(ctx context.Context, c *Controller, force bool) error {
	w.scanMu.Lock()
	defer w.scanMu.Unlock()
	start := time.Now()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	// The next page is listed while this one is evaluated and written, so
	// the writers never wait for a List. At most one page waits in pages;
	// a page's objects live until their reconciles end.
	pages := make(chan []unstructured.Unstructured, 1)
	listCtx, stopListing := context.WithCancel(ctx)
	defer stopListing()
	listed := make(chan error, 1)
	go func() {
		defer close(pages)
		// At least as new as the informer: what it has seen is listed.
		listed <- listPages(listCtx, c.scan.Resource(w.t.GVR), c.opts.PageSize, "", w.informer.LastSyncResourceVersion(), func(items []unstructured.Unstructured) error {
			select {
			case pages <- items:
				return nil
			case <-listCtx.Done():
				return listCtx.Err()
			}
		})
	}()
	var err error
dispatch:
	for items := range pages {
		for i := range items {
			select {
			case c.scanSlots <- struct{}{}:
			case <-ctx.Done():
				err = ctx.Err()
				break dispatch
			}
			wg.Go(func() {
				defer func() { <-c.scanSlots }()
				if err := c.reconcileObject(ctx, w.t, &items[i], force, w.current); err != nil {
					mu.Lock()
					if len(errs) < 10 {
						errs = append(errs, err)
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	stopListing()
	for range pages {
	}
	if lerr := <-listed; err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("scanning %s: %w: %w", w.t.GVR.Resource, errScanIncomplete, err)
	}
	c.log.V(1).Info("scanned", "resource", w.t.GVR.String(), "force", force, "took", time.Since(start).String())
	return errors.Join(errs...)
}

// current reports whether obj, as a scan listed it, is still the version
// of the object the informer holds. A listed page can be older than the
// events already handled: the object may have changed or been deleted
// (its report deleted) since. Such a copy is left alone: the watch event
// of the change or deletion, handled or queued, has the last word.
func (w *watcher) current(obj *unstructured.Unstructured) bool {
	m := w.held(obj)
	return m != nil && m.ResourceVersion == obj.GetResourceVersion()
}

// present reports whether the informer holds the object, in any version.
func (w *watcher) present(obj *unstructured.Unstructured) bool { return w.held(obj) != nil }

// held returns the informer's copy of the object (same UID), or nil.
func (w *watcher) held(obj *unstructured.Unstructured) *metav1.PartialObjectMetadata {
	key := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		key = ns + "/" + key
	}
	item, ok, _ := w.informer.GetStore().GetByKey(key)
	if !ok {
		return nil
	}
	m, ok := item.(*metav1.PartialObjectMetadata)
	if !ok || m.UID != obj.GetUID() {
		return nil
	}
	return m
}

// reconcileObject evaluates one resource, unless neither it nor the
// policies that can match it changed since it was last evaluated (force
// evaluates anyway), and writes its report when the results changed.
// current, when set, is asked under the resource's lock whether obj is
// still worth reconciling (see watcher.current); the informer updates its
// store before it calls the handler that deletes a report, so a stale
// copy can never write a report after its resource's deletion.
func (c *Controller) reconcileObject(ctx context.Context, t clusterstate.ResourceType, obj *unstructured.Unstructured, force bool, current func(*unstructured.Unstructured) bool) error {
	if obj.GetKind() == "" {
		obj.SetAPIVersion(t.APIVersion())
		obj.SetKind(t.Kind)
	}
	uid := obj.GetUID()
	unlock := c.lock(uid)
	defer unlock()
	if current != nil && !current(obj) {
		c.stats.Skipped.Add(1)
		return nil
	}

	snap := c.snap.Load()
	fingerprint := snap.types[t.GVR].fingerprint
	hash := contentHash(obj.Object)
	st := c.state(uid)
	if !force && st.evaluated && st.hash == hash && st.fingerprint == fingerprint {
		c.updateState(uid, func(st *resourceState) { st.rv = obj.GetResourceVersion() })
		c.stats.Skipped.Add(1)
		return nil
	}
	scope := report.Scope{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: uid}
	scan, err := c.evaluate(ctx, snap, obj)
	if err != nil {
		return err
	}

	written, err := c.writeScan(ctx, snap, scope, scan, st)
	if err != nil {
		return err
	}
	c.updateState(uid, func(st *resourceState) {
		st.remember(written.stored, written.rv)
		st.gvr, st.rv, st.hash, st.fingerprint, st.evaluated = t.GVR, obj.GetResourceVersion(), hash, fingerprint, true
	})
	return nil
}

// writtenReport is the stored report after a write: what it holds and its
// resourceVersion.
type writtenReport struct {
	stored storedReport
	rv     string
}

// writeScan brings a resource's report in line with a scan's results.
// When the stored report is known to hold background results only, the
// report is written without being read, on condition that it is still the
// one known; otherwise, or when that condition fails because another
// writer (an admission replica) wrote it since, the report is read and the
// scan merged into it, keeping the results that only admission produces.
func (c *Controller) writeScan(ctx context.Context, snap *snapshot, scope report.Scope, scan []v1alpha2.PolicyReportResult, st resourceState) (writtenReport, error) {
	blind := st.reportKnown && !st.foreign
	for attempt := 0; ; attempt++ {
		var (
			existing []v1alpha2.PolicyReportResult
			rv       = st.reportRV
			current  = st.digest
		)
		if !blind {
			var err error
			if existing, rv, _, err = c.reports.get(ctx, scope); err != nil {
				return writtenReport{}, err
			}
			current = digestOf(existing)
		}
		desired := report.ReplaceBackground(existing, scan, snap.background, snap.catalog)
		stored := describe(snap, desired)
		if stored.digest == current {
			return writtenReport{stored, rv}, nil
		}
		newRV, err := c.write(ctx, scope, desired, rv)
		switch {
		case err == nil:
			return writtenReport{stored, newRV}, nil
		case !errors.Is(err, errConflict) || attempt == maxConflicts:
			return writtenReport{}, err
		}
		c.stats.Conflicts.Add(1)
		blind = false
	}
}

// evaluate validates the object against the background policies, with at
// most Workers evaluations at once, and returns its report results. It
// runs only for resources really evaluated (reconcileObject skips the
// unchanged ones first), so Options.Metrics counts each evaluation once.
func (c *Controller) evaluate(ctx context.Context, snap *snapshot, obj *unstructured.Unstructured) ([]v1alpha2.PolicyReportResult, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.sem }()
	c.stats.Evaluations.Add(1)
	req, opts := engine.RequestForObject(obj), []engine.EvalOption{engine.WithLoaders(c.loaders()), engine.WithMutationScan()}
	if t := c.rescanStarted.Load(); t != nil {
		opts = append(opts, engine.WithImagesVerifiedSince(*t))
	}
	var resp *engine.Response
	if c.opts.Metrics != nil {
		// Timed only when recorded: the clock is read twice per policy.
		resp = snap.set.ValidateTimed(ctx, req, opts...)
		c.opts.Metrics.ObserveScan(resp)
	} else {
		resp = snap.set.Validate(ctx, req, opts...)
	}
	return report.Results(resp.Policies, c.opts.AllowedResults, report.ProcessBackground, c.now()), nil
}
