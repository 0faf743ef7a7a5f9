package reports

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/internal/droplog"
	"github.com/charter-dev/charter/reconciler/internal/runner"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// How long admission results wait for their resource to appear. The
// webhook sees a CREATE before the object is stored; a request another
// webhook then denies never stores it. Kyverno waits 2 minutes too.
// The first retry comes after admissionRetry, each later one after twice
// the last, up to admissionRetryMax: an object stored late is still found
// within seconds, and one never stored is looked up about 17 times over
// the 2 minutes instead of 60. A look-up is one in the kind's watch
// (admission_watch.go), or, for a kind the writer cannot watch, a GET of
// the report and one of the object (at 1,000 such requests a second the
// reads of a fixed 2 s wait were the API server's busiest work).
const (
	admissionRetry    = 2 * time.Second
	admissionRetryMax = 8 * time.Second
	admissionTimeout  = 2 * time.Minute
)

// retryAfter is the wait before the next attempt of results tried
// attempts times.
func retryAfter(attempts int) time.Duration {
	d := admissionRetry
	for i := 1; i < attempts && d < admissionRetryMax; i++ {
		d *= 2
	}
	return min(d, admissionRetryMax)
}

// policyLag bounds how long admission results wait for the writer's
// catalog to know a policy that produced them: with admission in another
// process (or a policy deleted and recreated), the two can see a policy
// apart. After that, results of a policy the writer does not know
// are taken for results of a deleted policy and dropped.
const policyLag = 30 * time.Second

// admissionWriters is how many resources' admission results are merged at
// once.
const admissionWriters = 2

// DefaultMaxPendingResources bounds the resources whose admission results
// wait for their report write: a request admitted but never stored
// (another webhook denied it) waits up to admissionTimeout, retried with
// a growing wait (retryAfter), and at a thousand such requests a second, unbounded,
// they would pile up to 120,000 and their retries take the API server's
// time from admission. Results of a resource beyond the bound are dropped,
// counted and logged; those of background policies come back with the
// next scan.
const DefaultMaxPendingResources = 5000

// AdmissionWriter merges the admission webhook's Audit results into the
// per-resource reports. Unlike the Controller it is not leader-elected:
// every replica that serves admission runs one, so results reach a report
// whichever replica admitted the request.
//
// Several processes write one report (this writer on each replica, the
// leader's scans), so every write is conditional on the resourceVersion
// it read and retried on a conflict: the writer reads the report, merges
// its results in by timestamp (admission-reports.md §6.3) and writes it
// back, leaving every other result as it found it. Results of policies
// that are gone are the leader's to drop (its scans and sweeps).
//
// Nothing is kept that a crash would lose but the queue itself: results
// of background policies come back with the next scan of the resource;
// results of admission-only policies (background: false) come back with
// the resource's next admission, as in Kyverno.
type AdmissionWriter struct {
	queue   *AdmissionQueue
	allowed report.AllowedResults
	log     logr.Logger
	meta    metadata.Interface
	kinds   *clusterstate.Kinds
	reports reportClient
	now     func() time.Time

	policies *policycache.Cache
	// catalog is rebuilt from the installed policies when stale is set.
	catalog atomic.Pointer[report.Catalog]
	stale   atomic.Bool

	// watches tell whether a resource is stored.
	watches *objectWatches

	mu      sync.Mutex
	pending map[types.UID]*pendingAdmission
	// held are the resources the writer has results of, pending or
	// being written: at most maxPending.
	held       map[types.UID]bool
	maxPending int
	// fullWhy says why results are dropped at maxPending.
	fullWhy string
	work    *runner.Queue[types.UID]

	writes atomic.Int64
}

// pendingAdmission is the admission results of one resource not yet in
// its report; several admissions of one resource become one write. The
// results are held packed (admission_pack.go), out of the collector's
// way, and unpacked when the resource is stored.
type pendingAdmission struct {
	scope   report.Scope
	results packedResults
	first   time.Time
	// attempts counts the writes tried so far (retryAfter).
	attempts int
}

// NewAdmissionWriter returns a writer that drains opts.Admission, with
// the controller's rate limits.
func NewAdmissionWriter(cfg *rest.Config, opts Options) (*AdmissionWriter, error) {
	if opts.Admission == nil {
		return nil, errors.New("reports: an admission writer needs an admission queue")
	}
	opts = opts.withDefaults()
	if opts.State == nil {
		return nil, errors.New("reports: the process's cluster state is required")
	}
	cl, err := newClients(cfg, opts.QPS, opts.Burst, opts.APIs, opts.ManagedBy, opts.Logger)
	if err != nil {
		return nil, err
	}
	log := opts.Logger.WithName("admission")
	opts.Admission.dropLog.Store(droplog.New(log, "admission results dropped: their resources' reports miss them until the next scan (background policies) or admission", 0))
	maxPending := opts.MaxPendingResources
	if maxPending <= 0 {
		maxPending = DefaultMaxPendingResources
	}
	return &AdmissionWriter{
		queue:      opts.Admission,
		maxPending: maxPending,
		fullWhy:    fmt.Sprintf("%d resources wait for their reports", maxPending),
		allowed:    opts.AllowedResults,
		log:        log,
		meta:       cl.meta,
		watches:    &objectWatches{meta: cl.meta, log: log},
		kinds:      clusterstate.NewKinds(cl.disco),
		reports:    cl.reports,
		now:        time.Now,
		policies:   opts.State.Policies,
		pending:    map[types.UID]*pendingAdmission{},
		held:       map[types.UID]bool{},
		work:       runner.New(runner.Options[types.UID]{Name: "reports-admission", Workers: admissionWriters}),
	}, nil
}

// NeedLeaderElection is false: every admission replica writes its own
// results.
func (w *AdmissionWriter) NeedLeaderElection() bool { return false }

// Writes counts the report writes the writer sent.
func (w *AdmissionWriter) Writes() int64 { return w.writes.Load() }

// Start runs the writer until ctx ends.
func (w *AdmissionWriter) Start(ctx context.Context) error {
	defer w.work.ShutDown()
	if err := w.kinds.Refresh(); err != nil {
		return err
	}
	w.stale.Store(true)
	w.policies.OnInstalledChange(func(*policycache.Installed) { w.stale.Store(true) })
	if !w.policies.WaitForSync(ctx) {
		return nil
	}

	w.watches.start(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.work.Run(ctx, w.processNext) })
	w.drain(ctx)
	wg.Wait()
	return nil
}

// drain turns queued admissions into pending results per resource until
// ctx ends.
func (w *AdmissionWriter) drain(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case item := <-w.queue.items:
			// Results the bound would drop are not made: at the bound
			// that is every admission of a new resource, and making
			// them was most of the writer's work.
			if w.full(item.resource.UID) {
				if report.Reportable(item.responses, w.allowed) {
					w.dropFull(item.resource)
				}
				continue
			}
			results := report.Results(item.responses, w.allowed, report.ProcessAdmission, item.at)
			if len(results) == 0 {
				continue
			}
			packed := packResults(nil, results)
			w.mu.Lock()
			if w.fullLocked(item.resource.UID) { // filled since full was asked
				w.mu.Unlock()
				w.dropFull(item.resource)
				continue
			}
			p := w.pending[item.resource.UID]
			if p == nil {
				p = &pendingAdmission{scope: item.resource, first: w.now()}
				w.pending[item.resource.UID] = p
				w.held[item.resource.UID] = true
			}
			if p.results == nil {
				p.results = packed
			} else {
				p.results = append(p.results, packed...)
			}
			w.mu.Unlock()
			w.work.Add(item.resource.UID)
		}
	}
}

// full reports whether new results of the resource would be dropped: it
// has none waiting and the writer holds as many resources as it may.
func (w *AdmissionWriter) full(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fullLocked(uid)
}

// fullLocked is full for a caller holding w.mu.
func (w *AdmissionWriter) fullLocked(uid types.UID) bool {
	return w.pending[uid] == nil && !w.held[uid] && len(w.held) >= w.maxPending
}

func (w *AdmissionWriter) dropFull(resource Resource) {
	w.queue.drop(resource, w.fullWhy)
}

// processNext writes a resource's pending results; results it could
// not write yet are looked at again after a growing wait (retryAfter),
// until admissionTimeout.
func (w *AdmissionWriter) processNext(ctx context.Context, uid types.UID) (time.Duration, error) {
	w.mu.Lock()
	p := w.pending[uid]
	delete(w.pending, uid)
	w.mu.Unlock()
	if p == nil {
		return 0, nil
	}
	retry, err := w.apply(ctx, p)
	if err != nil && ctx.Err() == nil {
		w.log.Error(err, "writing admission results", "resource", p.scope.String())
	}
	if (retry || err != nil) && ctx.Err() == nil && w.now().Sub(p.first) < admissionTimeout {
		// Put the results back in front of any that came meanwhile.
		p.attempts++
		w.mu.Lock()
		if later := w.pending[uid]; later != nil {
			later.results = append(p.results, later.results...)
			later.first = p.first
			later.attempts = p.attempts
		} else {
			w.pending[uid] = p
		}
		w.mu.Unlock()
		return retryAfter(p.attempts), nil
	}
	w.mu.Lock()
	if w.pending[uid] == nil {
		// No results came meanwhile: the writer is done with it.
		delete(w.held, uid)
	}
	w.mu.Unlock()
	return 0, nil
}

// apply merges pending admission results into the resource's report. It
// reports retry when the resource is not stored (yet) or a result names a
// policy the writer does not know yet.
func (w *AdmissionWriter) apply(ctx context.Context, p *pendingAdmission) (retry bool, err error) {
	// Only a stored resource gets a report: the object of a CREATE may
	// not be stored yet, or never (another webhook denied it). The kind's
	// watch says which without a read (admission_watch.go), and the
	// results stay packed until it is.
	gvr, err := w.resourceFor(p.scope)
	if err != nil {
		return false, err
	}
	answer := w.watches.stored(gvr, p.scope)
	switch answer {
	case storedUnknown, storedNo:
		return true, nil
	}
	results, err := p.results.unpack()
	if err != nil {
		return false, fmt.Errorf("admission results for %s: %w", p.scope, err)
	}
	catalog := w.currentCatalog()
	incoming := make([]v1alpha2.PolicyReportResult, 0, len(results))
	for i := range results {
		if catalog.HasResult(&results[i]) {
			incoming = append(incoming, results[i])
		}
	}
	if len(incoming) < len(results) && w.now().Sub(p.first) < policyLag {
		return true, nil
	}
	if len(incoming) == 0 {
		return false, nil
	}
	for attempt := 0; ; attempt++ {
		existing, rv, found, err := w.reports.get(ctx, p.scope)
		if err != nil {
			return false, err
		}
		if !found && answer == storedAsk {
			stored, err := w.stored(ctx, gvr, p.scope)
			if err != nil || !stored {
				return true, err
			}
		}
		merged := report.Merge(existing, incoming)
		if found && report.Equivalent(merged, existing) {
			return false, nil
		}
		w.writes.Add(1)
		_, err = w.reports.write(ctx, p.scope, merged, rv)
		if !errors.Is(err, errConflict) || attempt == maxConflicts {
			return false, err
		}
	}
}

// stored asks the API server whether the resource is stored under the
// scope's UID, for a kind the writer cannot watch.
func (w *AdmissionWriter) stored(ctx context.Context, gvr schema.GroupVersionResource, scope report.Scope) (bool, error) {
	ri := w.meta.Resource(gvr)
	var (
		m   *metav1.PartialObjectMetadata
		err error
	)
	if scope.Namespace != "" {
		m, err = ri.Namespace(scope.Namespace).Get(ctx, scope.Name, metav1.GetOptions{})
	} else {
		m, err = ri.Get(ctx, scope.Name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	// Another UID: the request's object was never stored and the name
	// reused, or it was replaced since.
	return m.UID == scope.UID, nil
}

func (w *AdmissionWriter) resourceFor(scope report.Scope) (schema.GroupVersionResource, error) {
	gv, err := schema.ParseGroupVersion(scope.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("admission result for %s: %w", scope, err)
	}
	selector := gv.Group + "/" + gv.Version + "/" + scope.Kind
	if gv.Group == "" {
		selector = gv.Version + "/" + scope.Kind
	}
	types := w.kinds.Resolve(selector)
	if len(types) == 0 {
		// A CRD installed since discovery was last asked.
		if err := w.kinds.Refresh(); err != nil {
			return schema.GroupVersionResource{}, err
		}
		types = w.kinds.Resolve(selector)
	}
	if len(types) == 0 {
		return schema.GroupVersionResource{}, fmt.Errorf("admission result for %s: kind %s is not served", scope, selector)
	}
	return types[0].GVR, nil
}

// currentCatalog returns the installed policies and their rules, rebuilt
// when a policy changed since it was last built.
func (w *AdmissionWriter) currentCatalog() report.Catalog {
	if w.stale.Swap(false) {
		c := report.NewCatalog(w.policies.Installed().Policies)
		w.catalog.Store(&c)
	}
	if c := w.catalog.Load(); c != nil {
		return *c
	}
	return nil
}
