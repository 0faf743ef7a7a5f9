package background

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/impersonate"
	"github.com/charter-dev/charter/clusterstate/loaders"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/internal/leadership"
	"github.com/charter-dev/charter/reconciler/internal/runner"
)

// Setup adds the background controller to the manager. It runs on every
// replica and elects its leader itself, on its own Lease.
func Setup(mgr manager.Manager, opts Options) (*Controller, error) {
	if opts.Logger.GetSink() == nil {
		opts.Logger = mgr.GetLogger().WithName("background")
	}
	c, err := New(mgr.GetConfig(), mgr.GetScheme(), mgr.GetCache(), mgr.GetRESTMapper(), mgr.GetEventRecorderFor("charter-background"), opts)
	if err != nil {
		return nil, err
	}
	return c, mgr.Add(c)
}

// Controller is the background controller.
type Controller struct {
	opts     Options
	log      logr.Logger
	cfg      *rest.Config // with opts.QPS and Burst
	client   client.Client
	informer crcache.Cache
	reader   client.Reader
	dyn      dynamic.Interface
	// impersonated write for namespaced policies (impersonate.go).
	impersonated *impersonate.Clients
	meta         metadata.Interface
	mapper       meta.RESTMapper
	kube         kubernetes.Interface
	kinds        *clusterstate.Kinds
	recorder     record.EventRecorder
	loaders      loader.Loaders

	compiled atomic.Pointer[compiledPolicies]
	// faults are the forbidden writes behind each policy's Background
	// condition.
	faults *permissionFaults
	// triggerNames finds triggers known only by UID.
	triggerNames triggerNames
	// watch is the current leadership term's watches.
	watch atomic.Pointer[watches]
	// snapshots wakes the running leader's policy loop: the policy cache
	// published a new snapshot.
	snapshots chan struct{}

	stats Stats
}

// Stats counts the controller's work.
type Stats struct {
	// Completed counts UpdateRequests done and deleted; Failed those left
	// Failed after their last attempt.
	Completed, Failed atomic.Int64
	// Writes counts the writes to downstream objects and mutate targets
	// (applies, updates, deletes).
	Writes atomic.Int64
}

// Stats returns the controller's counters.
func (c *Controller) Stats() *Stats { return &c.stats }

// New returns a background controller reading UpdateRequests from
// informers (a manager's cache) and writing with its own clients.
func New(cfg *rest.Config, scheme *runtime.Scheme, informers crcache.Cache, mapper meta.RESTMapper, recorder record.EventRecorder, opts Options) (*Controller, error) {
	opts = opts.withDefaults()
	if opts.State == nil {
		return nil, errors.New("background: the process's cluster state is required")
	}
	if opts.Namespace == "" {
		return nil, errors.New("background: a namespace is required")
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	cl, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("background: client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("background: dynamic client: %w", err)
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("background: metadata client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("background: client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("background: discovery client: %w", err)
	}
	impersonated, err := impersonate.New(cfg, opts.PolicyServiceAccount)
	if err != nil {
		return nil, fmt.Errorf("background: %w", err)
	}
	lds := opts.State.Loaders
	// Objects serve mutate-existing targets and clone sources; as
	// Resources, a MutatingPolicy's targets and resource.* of CEL policies.
	// resource.Post of a namespaced policy creates as its namespace's
	// ServiceAccount, as the controller's other writes for it do.
	objects := loaders.Objects{Client: dyn, Mapper: mapper, ForNamespace: impersonated.For}
	lds.Objects, lds.Resources = objects, objects
	c := &Controller{
		opts: opts, log: opts.Logger, cfg: cfg, client: cl, informer: informers, reader: informers,
		dyn: dyn, impersonated: impersonated, meta: md, mapper: mapper, kube: kube, kinds: clusterstate.NewKinds(disco),
		recorder: recorder, loaders: lds, snapshots: make(chan struct{}, 1), faults: newPermissionFaults(),
	}
	c.compiled.Store(&compiledPolicies{byID: map[string]kyvernov1.PolicyInterface{}})
	opts.State.Policies.Subscribe(func(*policycache.Snapshot) {
		select {
		case c.snapshots <- struct{}{}:
		default:
		}
	})
	return c, nil
}

// NeedLeaderElection is false: the controller elects on its own Lease.
func (c *Controller) NeedLeaderElection() bool { return false }

// Start runs the controller until ctx ends: while it holds its Lease, or
// all the time without leader election.
func (c *Controller) Start(ctx context.Context) error {
	if !c.opts.State.Policies.WaitForSync(ctx) {
		return nil
	}
	return leadership.NewLease(c.cfg, leadership.LeaseOptions{
		Enabled: c.opts.LeaderElection, Namespace: c.opts.Namespace, Name: c.opts.LeaseName,
		LeaseDuration: c.opts.LeaseDuration, RenewDeadline: c.opts.RenewDeadline, RetryPeriod: c.opts.RetryPeriod, Log: c.log,
	}, c.lead).Start(ctx)
}

// run is one leadership term: its queues and watches live as long as it.
type run struct {
	c     *Controller
	urs   *runner.Queue[types.NamespacedName]
	work  *runner.Queue[workItem]
	watch *watches
	// retryFailed are Failed UpdateRequests the resync gives one more
	// attempt.
	retryFailed sync.Map
}

// lead processes UpdateRequests, policy changes and watch events until
// ctx ends.
func (c *Controller) lead(ctx context.Context) error {
	if err := c.kinds.Refresh(); err != nil {
		return fmt.Errorf("background: %w", err)
	}
	r := &run{c: c, urs: runner.New(runner.Options[types.NamespacedName]{Name: "background-updaterequests", Workers: c.opts.Workers})}
	// Work that is not an UpdateRequest (watch events, policy syncs) is
	// given up after maxWorkRetries: the next policy change or leader
	// start does it again.
	r.work = runner.New(runner.Options[workItem]{Name: "background-work", Workers: c.opts.Workers, MaxRetries: maxWorkRetries,
		GiveUp: func(w workItem, err error) {
			c.log.Error(err, "giving up until the next policy change", "work", w.String())
			c.policyEvent(w.policy, "Warning", ReasonBackgroundFailed, fmt.Sprintf("%s failed: %v", w, err))
		}})
	r.watch = newWatches(ctx, c, r.work)
	defer r.urs.ShutDown()
	defer r.work.ShutDown()
	defer r.watch.stop()

	// The first policy sync treats every policy as new: it catches up on
	// whatever changed while no leader ran.
	old := c.compiled.Load()
	cur := c.take(c.opts.State.Policies.Snapshot())
	r.policiesChanged(ctx, &compiledPolicies{byID: map[string]kyvernov1.PolicyInterface{}}, cur, old)

	inf, err := c.informer.GetInformer(ctx, &kyvernov2.UpdateRequest{})
	if err != nil {
		return fmt.Errorf("background: watching UpdateRequests: %w", err)
	}
	enqueue := func(obj any) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if ur, ok := obj.(*kyvernov2.UpdateRequest); ok && ur.Namespace == c.opts.Namespace {
			r.urs.Add(types.NamespacedName{Namespace: ur.Namespace, Name: ur.Name})
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		// Status writes (Pending with a reason, retry counts) do not
		// re-enqueue: retries wait their backoff. A status reset by hand
		// (state back to Pending, retryCount 0) does.
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*kyvernov2.UpdateRequest)
			n, ok2 := newObj.(*kyvernov2.UpdateRequest)
			if ok1 && ok2 && n.Status.RetryCount < o.Status.RetryCount {
				enqueue(newObj)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("background: watching UpdateRequests: %w", err)
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()

	var wg sync.WaitGroup
	// A new term checks the conditions the last one may have left
	// unwritten.
	c.faults.markDirty(c.faults.tracked()...)
	wg.Go(func() { r.writeStatuses(ctx) })
	wg.Go(func() { r.urs.Run(ctx, r.handleUpdateRequest) })
	wg.Go(func() { r.work.Run(ctx, r.handleWork) })
	resync := time.NewTicker(c.opts.ResyncInterval)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			// The queues shut down with ctx.
			wg.Wait()
			return nil
		case <-resync.C:
			r.resync(ctx)
		case <-c.snapshots:
			prev := c.compiled.Load()
			next := c.take(c.opts.State.Policies.Snapshot())
			c.faults.forget(next.byID)
			r.policiesChanged(ctx, prev, next, prev)
		}
	}
}

// handleUpdateRequest reconciles one UpdateRequest; an error retries it.
func (r *run) handleUpdateRequest(ctx context.Context, key types.NamespacedName) (time.Duration, error) {
	err := r.c.reconcileUpdateRequest(ctx, r, key)
	if err != nil && ctx.Err() == nil {
		r.c.log.V(1).Info("UpdateRequest: retrying", "name", key.String(), "error", err.Error())
	}
	return 0, err
}

// maxWorkRetries bounds the retries of work that is not an UpdateRequest
// (watch events, policy syncs); the next policy change or leader start
// does it again.
const maxWorkRetries = 8

// handleWork does one work item; an error retries it up to
// maxWorkRetries times.
func (r *run) handleWork(ctx context.Context, w workItem) (time.Duration, error) {
	err := r.c.do(ctx, w, nil)
	if err != nil && ctx.Err() == nil && r.work.Retries(w) < maxWorkRetries {
		r.c.log.V(1).Info("retrying", "work", w.String(), "error", err.Error())
	}
	return 0, err
}

// retryDelay is the backoff before attempt n+1 of an UpdateRequest.
func (c *Controller) retryDelay(attempts int) time.Duration {
	d := c.opts.RetryBase
	for i := 1; i < attempts && d < c.opts.RetryMax; i++ {
		d *= 2
	}
	return min(d, c.opts.RetryMax)
}
