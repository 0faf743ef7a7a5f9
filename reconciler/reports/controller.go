package reports

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/impersonate"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/internal/leadership"
	"github.com/charter-dev/charter/reconciler/internal/runner"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// Setup adds the reports controller to the manager. The controller runs
// only on the leader (the manager's leader election, or the
// leadership.Group charter serve gives it), so `charter serve
// --controllers=reports` may run several replicas; a new Controller runs
// at each term of leadership (leadership.PerTerm), since one's queue, watches and
// knowledge of the reports end with its term. With an admission queue
// (Options.Admission) it adds an AdmissionWriter too, which every replica
// runs: admission results reach reports whichever replica admitted.
func Setup(mgr manager.Manager, opts Options) error {
	opts = withLogger(mgr, opts)
	controllers, err := leadership.PerTerm(mgr, func(m manager.Manager) error {
		c, err := New(m.GetConfig(), opts)
		if err != nil {
			return err
		}
		return m.Add(c)
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(controllers); err != nil {
		return err
	}
	return addAdmissionWriter(mgr, opts)
}

// SetupAdmissionWriter adds only the AdmissionWriter to the manager: a
// process that serves admission without the reports controller (charter's
// admission Deployment, whose ServiceAccount scans nothing) still writes
// the Audit results of the requests it admits into their reports, those of
// background: false policies included, which no scan produces.
func SetupAdmissionWriter(mgr manager.Manager, opts Options) error {
	opts = withLogger(mgr, opts)
	w, err := NewAdmissionWriter(mgr.GetConfig(), opts)
	if err != nil {
		return err
	}
	return mgr.Add(w)
}

// setup adds one Controller, for the whole life of the manager, and
// returns it: the tests' Setup, which read its Stats.
func setup(mgr manager.Manager, opts Options) (*Controller, error) {
	opts = withLogger(mgr, opts)
	c, err := New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	return c, addAdmissionWriter(mgr, opts)
}

func withLogger(mgr manager.Manager, opts Options) Options {
	if opts.Logger.GetSink() == nil {
		opts.Logger = mgr.GetLogger().WithName("reports")
	}
	return opts
}

// addAdmissionWriter adds the AdmissionWriter of opts.Admission, if any.
func addAdmissionWriter(mgr manager.Manager, opts Options) error {
	if opts.Admission == nil {
		return nil
	}
	w, err := NewAdmissionWriter(mgr.GetConfig(), opts)
	if err != nil {
		return err
	}
	return mgr.Add(w)
}

// Controller is the reports controller. Create it with New and run it with
// Start (or hand it to a manager with Setup).
type Controller struct {
	opts Options
	log  logr.Logger
	dyn  dynamic.Interface
	// scan and meta read the resources scans evaluate: as
	// Options.ServiceAccount when set, else as dyn.
	scan    dynamic.Interface
	meta    metadata.Interface
	kinds   *clusterstate.Kinds
	reports reportClient
	now     func() time.Time
	// cluster is the process's one source of installed policies, namespace
	// labels and context-entry loaders.
	cluster *clusterstate.State

	snap atomic.Pointer[snapshot]
	// rescanStarted is when the last full rescan began: image
	// verifications cached before it are not used, so every image is
	// verified again once per BackgroundScanInterval (see
	// engine.WithImagesVerifiedSince).
	rescanStarted atomic.Pointer[time.Time]

	mu       sync.Mutex
	states   map[types.UID]*resourceState
	watchers map[schema.GroupVersionResource]*watcher
	sweeps   uint64
	// swept is set once the first sweep has seen every report: from then
	// on a resource the controller has no state for has no report.
	swept bool
	// firstSwept is closed once the first sweep is done; scans wait for
	// it, so that they know which reports exist.
	firstSwept chan struct{}
	// applied is set once the first policy set is in place and watched.
	applied bool

	// locks serialise work on one resource (scan, event, admission).
	locks [64]sync.Mutex

	events *runner.Queue[eventKey]
	// sem bounds evaluations (CPU), writeSem report writes (waiting on the
	// API server), and scanSlots the resources a scan has in flight, so
	// that evaluation goes on while writes wait.
	sem       chan struct{}
	writeSem  chan struct{}
	scanSlots chan struct{}

	// policyChanged says the policy cache published a new snapshot: it
	// gathers bursts of policy changes, and of changes of the params a
	// policy may read, itself.
	policyChanged chan struct{}

	stats Stats
}

// Stats counts the controller's work since it started.
type Stats struct {
	// Evaluations counts resources evaluated against the policies.
	Evaluations atomic.Int64
	// Skipped counts resources not evaluated because neither they nor
	// their policies changed.
	Skipped atomic.Int64
	// Writes counts report creates, updates and deletes.
	Writes atomic.Int64
	// Conflicts counts writes that found the report changed by another
	// writer since it was read, and so read it again and merged.
	Conflicts atomic.Int64
}

// resourceState is all the controller keeps per resource.
type resourceState struct {
	gvr         schema.GroupVersionResource
	rv          string
	hash        uint64
	fingerprint uint64
	evaluated   bool

	// reportKnown says digest, foreign and reportRV describe the stored
	// report, so it need not be read before deciding whether to write.
	// Another writer may have changed the report since; writes are
	// conditional on reportRV, so that is found out when it matters.
	reportKnown bool
	digest      string // "" when there is no report
	reportRV    string // "" when there is no report
	// foreign reports results of policies outside the background set,
	// which only admission produces; a write must then merge with the
	// stored report.
	foreign bool
	swept   uint64
}

type eventKey struct {
	gvr             schema.GroupVersionResource
	namespace, name string
	// deleted carries the UID of a deleted resource.
	deleted types.UID
	// recheck carries the UID of a report's resource found gone while the
	// report was younger than Options.GoneGracePeriod (see gone.go).
	recheck types.UID
}

// New returns a reports controller that talks to the API server at cfg
// with its own rate limits.
func New(cfg *rest.Config, opts Options) (*Controller, error) {
	opts = opts.withDefaults()
	if opts.State == nil {
		return nil, errors.New("reports: the process's cluster state is required")
	}
	cl, err := newClients(cfg, opts.QPS, opts.Burst, opts.APIs, opts.ManagedBy, opts.Logger)
	if err != nil {
		return nil, err
	}
	scan, meta := cl.dyn, cl.meta
	if opts.ServiceAccount != "" {
		if scan, meta, err = scanClients(cfg, opts); err != nil {
			return nil, err
		}
	}
	return &Controller{
		opts:          opts,
		log:           opts.Logger,
		dyn:           cl.dyn,
		scan:          scan,
		meta:          meta,
		kinds:         clusterstate.NewKinds(cl.disco),
		reports:       cl.reports,
		now:           time.Now,
		cluster:       opts.State,
		states:        map[types.UID]*resourceState{},
		watchers:      map[schema.GroupVersionResource]*watcher{},
		events:        runner.New(runner.Options[eventKey]{Name: "reports-resources", Workers: opts.Workers}),
		sem:           make(chan struct{}, opts.Workers),
		writeSem:      make(chan struct{}, opts.WriteWorkers),
		scanSlots:     make(chan struct{}, opts.Workers+opts.WriteWorkers),
		policyChanged: make(chan struct{}, 1),
		firstSwept:    make(chan struct{}),
	}, nil
}

// clients are the API clients of one of the package's runnables, which
// share one rate limiter: the QPS bounds what the runnable asks of the
// API server, not what each client does.
type clients struct {
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	meta    metadata.Interface
	disco   discovery.DiscoveryInterface
	reports reportClient
}

func newClients(cfg *rest.Config, qps float32, burst int, apis []policyreport.API, managedBy string, log logr.Logger) (clients, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = qps, burst
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return clients{}, fmt.Errorf("reports: client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return clients{}, fmt.Errorf("reports: dynamic client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return clients{}, fmt.Errorf("reports: metadata client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return clients{}, fmt.Errorf("reports: discovery client: %w", err)
	}
	reports, err := newReportClient(cfg, dyn, apis, managedBy, log)
	if err != nil {
		return clients{}, fmt.Errorf("reports: report client: %w", err)
	}
	return clients{kube: kube, dyn: dyn, meta: meta, disco: disco, reports: reports}, nil
}

// scanClients are the clients scans read resources with as
// Options.ServiceAccount, under the same limits as the controller's own.
func scanClients(cfg *rest.Config, opts Options) (dynamic.Interface, metadata.Interface, error) {
	cfg, err := impersonate.Config(cfg, opts.ServiceAccount)
	if err != nil {
		return nil, nil, fmt.Errorf("reports: %w", err)
	}
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(opts.QPS, opts.Burst)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("reports: dynamic client: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("reports: metadata client: %w", err)
	}
	return dyn, meta, nil
}

// NeedLeaderElection makes the manager run the controller on the leader
// only.
func (c *Controller) NeedLeaderElection() bool { return true }

// Stats returns the controller's counters.
func (c *Controller) Stats() *Stats { return &c.stats }

func (c *Controller) lock(uid types.UID) func() {
	h := fnv.New32a()
	h.Write([]byte(uid))
	m := &c.locks[h.Sum32()%uint32(len(c.locks))]
	m.Lock()
	return m.Unlock
}

// state returns a copy of what is known about a resource. The fields are
// guarded by c.mu; the per-resource lock only keeps two workers from
// reconciling one resource at once.
func (c *Controller) state(uid types.UID) resourceState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.states[uid]; st != nil {
		return *st
	}
	return resourceState{reportKnown: c.swept}
}

// updateState changes what is known about a resource.
func (c *Controller) updateState(uid types.UID, change func(st *resourceState)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.states[uid]
	if st == nil {
		st = &resourceState{reportKnown: c.swept}
		c.states[uid] = st
	}
	change(st)
}

// Start runs the controller until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	defer c.events.ShutDown()
	// The first sweep lists the reports while the policy informers sync,
	// and waits for the first policy set only to prune what it listed: on a
	// fresh API server the first request for each resource waits for the
	// server to set up its storage (about a second each on a busy one), so
	// one after the other they would add up.
	started := time.Now()
	sweepCtx, stopSweep := context.WithCancel(ctx)
	defer stopSweep()
	compiled := make(chan struct{})
	swept := make(chan error, 1)
	go func() {
		swept <- c.sweep(sweepCtx, func() (*snapshot, error) {
			select {
			case <-compiled:
				return c.snap.Load(), nil
			case <-sweepCtx.Done():
				return nil, sweepCtx.Err()
			}
		})
	}()
	// Discovery runs in applyPolicies, once the policies are known.
	unsubscribe, err := c.subscribe(ctx)
	defer unsubscribe()
	if err != nil {
		return err
	}
	c.log.V(1).Info("policy cache synced", "took", time.Since(started).String())
	firstSweep := func() error {
		close(compiled)
		err := <-swept
		c.log.V(1).Info("reports swept", "took", time.Since(started).String())
		return err
	}
	if err := c.applyPolicies(ctx, firstSweep); err != nil {
		return err
	}

	var wg sync.WaitGroup
	wg.Go(func() { c.events.Run(ctx, c.processEvent) })

	ticker := time.NewTicker(c.opts.BackgroundScanInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			// The queue shuts down with ctx.
			wg.Wait()
			c.stopWatchers()
			return nil
		case <-c.policyChanged:
			if err := c.applyPolicies(ctx, nil); err != nil {
				c.log.Error(err, "applying policy changes")
			}
		case <-ticker.C:
			if err := c.FullRescan(ctx); err != nil && ctx.Err() == nil {
				c.log.Error(err, "full background rescan")
			}
		}
	}
}

// subscribe asks the process's policy cache for every new snapshot and
// waits for its first sync. unsubscribe ends it: a controller runs for one
// term of leadership (Setup), and the process's caches must not keep a
// stopped one.
func (c *Controller) subscribe(ctx context.Context) (unsubscribe func(), err error) {
	// A change of a param a background policy may read comes as a
	// snapshot too, whose ParamGeneration of that policy changed: its
	// resource types are rescanned; an object of the kind that no
	// policy's paramRef can select (most ConfigMaps, for a ConfigMap
	// paramKind) rescans nothing.
	unsubscribe = c.cluster.Policies.Subscribe(func(*policycache.Snapshot) { signal(c.policyChanged) })
	if !c.cluster.Policies.WaitForSync(ctx) {
		return unsubscribe, fmt.Errorf("reports: the policy cache did not sync: %w", ctx.Err())
	}
	// The installed policies are applied below by Start itself.
	select {
	case <-c.policyChanged:
	default:
	}
	return unsubscribe, nil
}

// signal wakes the loop waiting on ch, unless it is woken already.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// applyPolicies takes the policy cache's current snapshot and brings watches,
// reports and results in line: new resource types are watched and
// scanned, types whose policies changed are rescanned (resources whose
// fingerprint is unchanged are skipped), types no policy matches any more
// are scanned one last time (dropping their results) and unwatched, and
// when a policy or rule went away every report is swept. The first call
// is handed the first sweep, already under way, to finish once the
// policies are compiled.
func (c *Controller) applyPolicies(ctx context.Context, firstSweep func() error) error {
	policies := c.cluster.Policies.Snapshot()
	// CRDs come and go: let discovery see the current kinds.
	if err := c.kinds.Refresh(); err != nil {
		if c.snap.Load() == nil {
			return err // no previous answer to fall back on
		}
		c.log.Error(err, "refreshing discovery; using the previous answer")
	}
	snap := buildSnapshot(policies, c.kinds)
	for _, f := range snap.compileErrors {
		c.log.Info("policy left out of background scans", "error", f.Error())
	}
	old := c.snap.Swap(snap)
	c.log.Info("policies taken", "generation", policies.Generation, "installed", len(policies.Installed.Policies), "background", len(snap.background),
		"exceptions", len(policies.Installed.Exceptions)+len(policies.Installed.CELExceptions), "resourceTypes", len(snap.types), "invalid", len(snap.compileErrors))

	first := old == nil
	if !first && leftBackground(old, snap) {
		// Results of such a policy now come only from admission: reports
		// holding them must be merged, not overwritten.
		c.forgetReports()
	}
	switch {
	case first && firstSweep != nil:
		// The watchers start now, so that their informers list while the
		// sweep ends; their scans wait for the sweep (see startWatcher).
		c.updateWatchers(ctx, old, snap)
		if err := firstSweep(); err != nil {
			return err
		}
		close(c.firstSwept)
		return nil
	case first || catalogShrank(old.catalog, snap.catalog):
		if err := c.sweep(ctx, fixedSnapshot(snap)); err != nil {
			return err
		}
	}
	if first {
		close(c.firstSwept)
	}
	c.updateWatchers(ctx, old, snap)
	return nil
}

// updateWatchers starts watching the resource types of a new policy set,
// rescans those whose policies changed, and stops watching those no
// policy matches any more.
func (c *Controller) updateWatchers(ctx context.Context, old, snap *snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for gvr, t := range snap.types {
		w, ok := c.watchers[gvr]
		switch {
		case !ok:
			c.watchers[gvr] = c.startWatcher(ctx, t.ResourceType)
		case old.types[gvr].fingerprint != t.fingerprint:
			go w.scan(ctx, c, false)
		}
	}
	for gvr, w := range c.watchers {
		if _, ok := snap.types[gvr]; !ok {
			delete(c.watchers, gvr)
			go func() {
				// With no policy for the type left, the scan evaluates to no
				// results and removes the background ones.
				w.scan(ctx, c, false)
				w.stop()
			}()
		}
	}
	c.applied = true
}

// leftBackground reports whether a policy still installed stopped being
// part of background scans.
func leftBackground(old, cur *snapshot) bool {
	for key := range old.background {
		if !cur.background[key] && cur.catalog[key] != nil {
			return true
		}
	}
	return false
}

// catalogShrank reports whether a policy or a rule went away.
func catalogShrank(old, cur report.Catalog) bool {
	for key, rules := range old {
		for rule := range rules {
			if !cur.Has(key, rule) {
				return true
			}
		}
	}
	return false
}

func (c *Controller) forgetReports() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.states {
		st.reportKnown = false
	}
}

func (c *Controller) stopWatchers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for gvr, w := range c.watchers {
		w.stop()
		delete(c.watchers, gvr)
	}
}

// Synced reports whether every watched resource type has had its first
// scan since it started being watched.
func (c *Controller) Synced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.applied {
		return false
	}
	for _, w := range c.watchers {
		if !w.scanned.Load() {
			return false
		}
	}
	return true
}

// FullRescan sweeps every report and evaluates every watched resource
// again, whatever its fingerprint, writing only reports whose results
// changed. It returns when the rescan is done.
//
// Images of verifyImages rules are verified again, not taken from a cache
// filled before the rescan began: a signature removed since admission
// shows as a fail.
func (c *Controller) FullRescan(ctx context.Context) error {
	snap := c.snap.Load()
	if snap == nil {
		return errors.New("reports: controller not started")
	}
	started := c.now()
	c.rescanStarted.Store(&started)
	if err := c.sweep(ctx, fixedSnapshot(snap)); err != nil {
		return err
	}
	c.mu.Lock()
	watchers := make([]*watcher, 0, len(c.watchers))
	for _, w := range c.watchers {
		watchers = append(watchers, w)
	}
	c.mu.Unlock()
	var errs []error
	for _, w := range watchers {
		if err := w.scan(ctx, c, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fixedSnapshot hands sweep a policy set already known.
func fixedSnapshot(snap *snapshot) func() (*snapshot, error) {
	return func() (*snapshot, error) { return snap, nil }
}

// sweep reads every report charter manages: a report whose resource is
// gone is deleted (see gone.go), results of policies or rules that are
// gone are dropped (a report left empty is deleted), and what the report
// holds is remembered so scans need not read it again. It asks
// policies for the policy set once it has a report to look at.
func (c *Controller) sweep(ctx context.Context, policies func() (*snapshot, error)) error {
	c.mu.Lock()
	c.sweeps++
	gen := c.sweeps
	c.mu.Unlock()
	// What each primary report holds after the sweep, for the copies in
	// the other report APIs to be checked against.
	var (
		primariesMu sync.Mutex
		primaries   = map[types.UID]sweptReport{}
	)
	kept := func(scope report.Scope, digest string) {
		if len(c.reports.copies()) > 0 {
			primariesMu.Lock()
			primaries[scope.UID] = sweptReport{scope, digest}
			primariesMu.Unlock()
		}
	}
	err := c.reports.list(ctx, c.opts.PageSize, func(u *unstructured.Unstructured) error {
		parsed, err := report.Parse(u)
		if err != nil {
			c.log.Error(err, "skipping unreadable report")
			return nil
		}
		snap, err := policies()
		if err != nil {
			return err
		}
		scope := parsed.Scope
		scope.Namespace = u.GetNamespace()
		unlock := c.lock(scope.UID)
		defer unlock()
		if c.resourceGoneFor(ctx, seenReport{scope, u.GetCreationTimestamp().Time}) {
			if err := c.deleteReportLocked(ctx, scope); err != nil {
				return fmt.Errorf("sweeping the report of %s, which is gone: %w", scope, err)
			}
			c.log.Info("deleted the report of a resource that is gone", "report", scope.String())
			return nil
		}
		results, rv := parsed.Results, u.GetResourceVersion()
		// A report written since the list was taken is read again, rather
		// than an older one remembered than the one known.
		st := c.state(scope.UID)
		reread := st.reportKnown && st.reportRV != rv
		for attempt := 0; ; attempt++ {
			if reread {
				var found bool
				if results, rv, found, err = c.reports.get(ctx, scope); err != nil {
					return err
				}
				if !found {
					results, rv = nil, ""
				}
			}
			pruned := report.Prune(results, snap.catalog)
			newRV := rv
			if !report.Equivalent(pruned, results) {
				newRV, err = c.write(ctx, scope, pruned, rv)
			}
			switch {
			case err == nil:
				stored := describe(snap, pruned)
				c.updateState(scope.UID, func(st *resourceState) {
					st.remember(stored, newRV)
					st.swept = gen
				})
				kept(scope, stored.digest)
				return nil
			case !errors.Is(err, errConflict) || attempt == maxConflicts:
				return fmt.Errorf("sweeping the report of %s: %w", scope, err)
			}
			c.stats.Conflicts.Add(1)
			reread = true
		}
	})
	if err != nil {
		return err
	}
	if err := c.syncCopies(ctx, primaries); err != nil {
		return err
	}
	// A report known to exist that the sweep did not see was deleted by
	// someone else: read it again before relying on it.
	c.mu.Lock()
	defer c.mu.Unlock()
	c.swept = true
	for _, st := range c.states {
		if st.reportKnown && st.digest != "" && st.swept != gen {
			st.reportKnown = false
		}
	}
	return nil
}

// sweptReport is a primary report as the sweep left it.
type sweptReport struct {
	scope  report.Scope
	digest string
}

// syncCopies makes the reports of every other API (--reports-api=both)
// say what the primary reports the sweep left say: a copy that differs
// or whose primary report is gone follows it, and a primary report with
// no copy gets one. Copies lag after a copy that failed, or after
// charter ran with another --reports-api; at every sweep (start, policy
// removal, full rescan) they catch up. Copies that agree cost a list
// and no write.
func (c *Controller) syncCopies(ctx context.Context, primaries map[types.UID]sweptReport) error {
	for _, a := range c.reports.copies() {
		var (
			mu     sync.Mutex
			stale  []report.Scope
			copied = map[types.UID]bool{}
		)
		err := c.reports.listIn(ctx, a, c.opts.PageSize, func(u *unstructured.Unstructured) error {
			parsed, err := report.Parse(u)
			if err != nil {
				c.log.Error(err, "skipping unreadable report")
				return nil
			}
			scope := parsed.Scope
			scope.Namespace = u.GetNamespace()
			digest := digestOf(parsed.Results)
			mu.Lock()
			defer mu.Unlock()
			copied[scope.UID] = true
			if p, ok := primaries[scope.UID]; !ok || p.digest != digest {
				stale = append(stale, scope)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for uid, p := range primaries {
			if !copied[uid] && p.digest != "" {
				stale = append(stale, p.scope)
			}
		}
		for _, scope := range stale {
			if err := c.reports.follow(ctx, a, scope); err != nil {
				return fmt.Errorf("bringing the %s of %s in line: %w", scope.ReportKind(a.api), scope, err)
			}
			c.stats.Writes.Add(1)
		}
	}
	return nil
}

func digestOf(results []v1alpha2.PolicyReportResult) string {
	if len(results) == 0 {
		return ""
	}
	return report.Digest(results)
}

// storedReport is what the controller remembers of a stored report.
type storedReport struct {
	digest  string
	foreign bool
}

// describe works out what to remember of a report holding the results.
// It runs outside c.mu: digesting is the costly part.
func describe(snap *snapshot, results []v1alpha2.PolicyReportResult) storedReport {
	d := storedReport{digest: digestOf(results)}
	for i := range results {
		if !snap.background[report.ResultRef(&results[i])] {
			d.foreign = true
			break
		}
	}
	return d
}

// remember records what the stored report at resourceVersion rv holds.
func (st *resourceState) remember(d storedReport, rv string) {
	st.reportKnown = true
	st.digest = d.digest
	st.foreign = d.foreign
	st.reportRV = rv
}

// maxConflicts bounds how often one reconcile reads a report again after
// a write found it changed: writers race on one report only while one
// resource is admitted many times at once, and the work is queued again
// when they keep winning.
const maxConflicts = 5

// write writes a report, on condition that the stored one is at rv (""
// when there is none), and returns the new resourceVersion. At most
// WriteWorkers writes are in flight.
func (c *Controller) write(ctx context.Context, scope report.Scope, results []v1alpha2.PolicyReportResult, rv string) (string, error) {
	if len(results) == 0 && rv == "" {
		return "", nil
	}
	select {
	case c.writeSem <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-c.writeSem }()
	c.stats.Writes.Add(1)
	return c.reports.write(ctx, scope, results, rv)
}

// loaders are what context entries read as resources are scanned: the
// process's, which the admission webhook uses too.
func (c *Controller) loaders() loader.Loaders { return c.cluster.Loaders }
