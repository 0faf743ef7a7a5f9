package policycache

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate/internal/listeners"
	"github.com/charter-dev/charter/clusterstate/policycheck"
)

// DefaultDebounce is how long the cache waits for the changes to stop
// before it rebuilds: a Git sync applying five hundred policies causes a
// handful of builds, not five hundred, and each build compiles only the
// policies that changed since the one before.
const DefaultDebounce = 100 * time.Millisecond

// DefaultMaxDelay bounds how long a steady stream of changes can hold a
// rebuild back, so a busy cluster still sees its policies in force
// within about a second.
const DefaultMaxDelay = time.Second

// Cache keeps a Snapshot of the installed policies current. It runs in
// every replica (it is a manager.Runnable that does not need leader
// election) and reads through the manager's shared informers.
type Cache struct {
	reader   crcache.Cache
	builder  *Builder
	debounce time.Duration
	maxDelay time.Duration
	log      logr.Logger

	current   atomic.Pointer[Snapshot]
	installed atomic.Pointer[Installed]
	changed   chan struct{}
	synced    atomic.Bool
	// syncedCh is closed when the first snapshot is published.
	syncedCh chan struct{}

	// exceptionNamespaces are the namespaces whose exceptions count;
	// ignoredSeen is what reportIgnored already reported and ignoredNow
	// what the last rebuild left out, both under ignoredMu, which is held
	// while the OnIgnoredException listeners run (see CatchUpIgnored).
	exceptionNamespaces ExceptionNamespaces
	ignoredMu           sync.Mutex
	ignoredSeen         ignoredOnce
	ignoredNow          []IgnoredException

	// paramReaders are the installed policies that read params, and
	// paramGens, by policyid.Of, the changes of the params each may read
	// (see ParamChanged); paramsDirty says they changed since the last
	// snapshot. All under paramMu.
	paramMu      sync.Mutex
	paramReaders []paramReader
	paramGens    map[string]uint64
	paramsDirty  bool

	mu                 sync.Mutex
	ignoredListeners   []func(IgnoredException)
	listeners          []func(*Snapshot)
	subscribers        listeners.Set[func(*Snapshot)]
	changeListeners    []func(kyvernov1.PolicyInterface, PolicyChange)
	installedListeners []func(*Installed)
}

// Installed is every policy and PolicyException installed, as one rebuild
// of the cache read them from the informers: the policies that do not run
// at admission too, for those that read the objects themselves (the
// params informers, the reports' catalog, DeletingPolicy runs); the
// compiled sets are in the Snapshot. It is immutable: never modify the
// objects.
type Installed struct {
	// Policies are sorted: ClusterPolicies first, then Policies by
	// namespace and name.
	Policies []kyvernov1.PolicyInterface
	// Exceptions are sorted by namespace and name.
	Exceptions []*kyvernov2.PolicyException
	// CELExceptions are the policies.kyverno.io PolicyExceptions, sorted
	// by namespace and name. Like Exceptions they come from trusted
	// namespaces only, and so act in any namespace
	// (engine.ExceptionAnyNamespace).
	CELExceptions []*policiesv1.PolicyException
	// Generation counts the rebuilds that read the installed objects,
	// starting at 1.
	Generation uint64
}

// New returns a cache reading from the informers of reader; call Start
// (or add it to a manager) to fill it. Until then Snapshot is Empty.
func New(reader crcache.Cache, log logr.Logger, opts ...Option) *Cache {
	c := &Cache{
		reader: reader, builder: NewBuilder(), log: log,
		debounce: DefaultDebounce, maxDelay: DefaultMaxDelay,
		changed: make(chan struct{}, 1), syncedCh: make(chan struct{}),
		exceptionNamespaces: AllExceptionNamespaces(), ignoredSeen: ignoredOnce{},
	}
	for _, o := range opts {
		o(c)
	}
	c.current.Store(Empty())
	c.installed.Store(&Installed{})
	return c
}

// Option configures a Cache.
type Option func(*Cache)

// WithExceptionNamespaces makes the cache honour PolicyExceptions from
// these namespaces only (default: every namespace). The others are left
// out of the snapshot and of Installed, so no controller of the process
// applies them, and OnIgnoredException is told about each once per
// generation.
func WithExceptionNamespaces(ns ExceptionNamespaces) Option {
	return func(c *Cache) { c.exceptionNamespaces = ns }
}

// ExceptionNamespaces returns the namespaces whose exceptions the cache
// honours.
func (c *Cache) ExceptionNamespaces() ExceptionNamespaces { return c.exceptionNamespaces }

// OnIgnoredException registers fn to be called, from the cache's
// goroutine, for each PolicyException left out because its namespace is
// not trusted: once per generation of the exception, not on every
// rebuild. fn must not block.
func (c *Cache) OnIgnoredException(fn func(IgnoredException)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ignoredListeners = append(c.ignoredListeners, fn)
}

// CatchUpIgnored calls fn with the exceptions ignored as of the last
// rebuild, while no rebuild reports any: a listener that starts acting
// only later (on the replica elected leader) acts on what it was told
// before, through fn, and on what comes after, through its
// OnIgnoredException listener, each exactly once.
func (c *Cache) CatchUpIgnored(fn func([]IgnoredException)) {
	c.ignoredMu.Lock()
	defer c.ignoredMu.Unlock()
	fn(c.ignoredNow)
}

// Installed returns the policies and exceptions installed as of the last
// rebuild. It never blocks; before the first sync it is empty.
func (c *Cache) Installed() *Installed { return c.installed.Load() }

// OnInstalledChange registers fn to be called, from the cache's goroutine,
// after every rebuild that followed a change to a policy's or an
// exception's spec, labels or annotations (whether or not the admission
// snapshot changed), and once with the first sync. Status writes call
// nothing. fn must not block.
func (c *Cache) OnInstalledChange(fn func(*Installed)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.installedListeners = append(c.installedListeners, fn)
}

// WaitForSync blocks until the first snapshot is published or ctx ends,
// and reports whether it was published.
func (c *Cache) WaitForSync(ctx context.Context) bool {
	select {
	case <-c.syncedCh:
		return true
	case <-ctx.Done():
		return false
	}
}

// Snapshot returns the policies currently in force. It never blocks.
func (c *Cache) Snapshot() *Snapshot { return c.current.Load() }

// Synced reports whether the first snapshot from the cluster is published.
func (c *Cache) Synced() bool { return c.synced.Load() }

// OnChange registers fn to be called, from the cache's goroutine, with each
// new snapshot whose admission sets changed (the webhook configuration and
// status controllers use it).
func (c *Cache) OnChange(fn func(*Snapshot)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listeners = append(c.listeners, fn)
}

// Subscribe registers fn to be called, from the cache's goroutine, with
// every new snapshot, whatever changed in it (a param a policy may read
// too, see ParamChanged): the controllers that evaluate its views
// (reports, background) subscribe, and compile nothing and debounce
// nothing of their own. A burst of changes is one snapshot (the cache
// debounces). fn must not block. A subscriber that stops (a controller
// whose term of leadership ended) unsubscribes.
func (c *Cache) Subscribe(fn func(*Snapshot)) (unsubscribe func()) {
	return c.subscribers.Add(fn)
}

// NeedLeaderElection is false: every replica serves admission.
func (c *Cache) NeedLeaderElection() bool { return false }

// Start watches policies, exceptions and namespaces, publishes the first
// snapshot once the informers are synced, and then rebuilds after every
// burst of changes until ctx ends. A rebuild compiles only the policies
// and exceptions that changed (see Builder).
func (c *Cache) Start(ctx context.Context) error {
	var watched []client.Object
	for _, k := range append(policycheck.Kinds(policycheck.RolePolicy), policycheck.Kinds(policycheck.RoleException)...) {
		watched = append(watched, k.New())
	}
	for _, obj := range append(watched, &corev1.Namespace{}) {
		inf, err := c.reader.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("policy cache: informer for %T: %w", obj, err)
		}
		if _, isNamespace := obj.(*corev1.Namespace); isNamespace {
			// Namespace labels are read per request; no recompile needed.
			continue
		}
		// Exceptions are no policies: policyChanged and policyUpdated
		// leave them alone.
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				c.policyChanged(obj, PolicyCreated)
				c.poke()
			},
			UpdateFunc: func(oldObj, newObj any) {
				c.policyUpdated(oldObj, newObj)
				c.pokeIfSpecChanged(oldObj, newObj)
			},
			DeleteFunc: func(obj any) {
				c.policyChanged(obj, PolicyDeleted)
				c.poke()
			},
		}); err != nil {
			return fmt.Errorf("policy cache: watching %T: %w", obj, err)
		}
	}
	if !c.reader.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	if err := c.rebuild(ctx); err != nil {
		return err
	}
	c.synced.Store(true)
	close(c.syncedCh)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.changed:
		}
		if !c.settle(ctx) {
			return nil
		}
		if err := c.rebuild(ctx); err != nil {
			c.log.Error(err, "policy cache: rebuilding the policy snapshot; the previous one stays in force")
		}
	}
}

// settle waits, after a change, until no further change came for the
// debounce period, or until the maximum delay since the first change has
// passed. It returns false when ctx ends first.
func (c *Cache) settle(ctx context.Context) bool {
	quiet := time.NewTimer(c.debounce)
	defer quiet.Stop()
	deadline := time.NewTimer(c.maxDelay)
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-quiet.C:
			return true
		case <-deadline.C:
			return true
		case <-c.changed:
			quiet.Reset(c.debounce)
		}
	}
}

func (c *Cache) poke() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// pokeIfSpecChanged ignores updates that leave the generation alone
// (status writes, which the policy status controller makes often).
func (c *Cache) pokeIfSpecChanged(oldObj, newObj any) {
	o, ok1 := oldObj.(client.Object)
	n, ok2 := newObj.(client.Object)
	if ok1 && ok2 && o.GetGeneration() == n.GetGeneration() && o.GetGeneration() != 0 &&
		equalLabels(o.GetLabels(), n.GetLabels()) && equalLabels(o.GetAnnotations(), n.GetAnnotations()) {
		return
	}
	c.poke()
}

func equalLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// rebuild reads what the informers hold, compiles what changed and
// publishes the new snapshot, if anything changed.
func (c *Cache) rebuild(ctx context.Context) error {
	policies, err := ListPolicies(ctx, c.reader)
	if err != nil {
		return err
	}
	var exs kyvernov2.PolicyExceptionList
	if err := c.reader.List(ctx, &exs); err != nil {
		return fmt.Errorf("listing PolicyExceptions: %w", err)
	}
	exceptions := make([]*kyvernov2.PolicyException, 0, len(exs.Items))
	for i := range exs.Items {
		exceptions = append(exceptions, &exs.Items[i])
	}
	var celExs policiesv1.PolicyExceptionList
	if err := c.reader.List(ctx, &celExs); err != nil {
		return fmt.Errorf("listing policies.kyverno.io PolicyExceptions: %w", err)
	}
	celExceptions := make([]*policiesv1.PolicyException, 0, len(celExs.Items))
	for i := range celExs.Items {
		celExceptions = append(celExceptions, &celExs.Items[i])
	}
	// Exceptions from untrusted namespaces go no further: neither the
	// admission snapshot nor Installed, which every other controller
	// compiles from, holds them.
	exceptions, ignored := trustedExceptions(c.exceptionNamespaces, exceptions)
	celExceptions, celIgnored := trustedExceptions(c.exceptionNamespaces, celExceptions)
	c.reportIgnored(append(ignored, celIgnored...))
	in := c.publishInstalled(policies, exceptions, celExceptions)
	start := time.Now()
	s, stats := c.builder.BuildInstalled(in)
	paramGens, paramsChanged := c.takeParams()
	if !stats.Changed && !paramsChanged {
		c.log.V(1).Info("policy snapshot unchanged", "generation", s.Generation)
		return nil
	}
	if !stats.Changed {
		// Only params changed: the same sets, counted anew, go to the
		// subscribers.
		same := *c.current.Load()
		s = &same
	}
	// s is new and not shared yet: numbering it is its last write.
	s.params = paramGens
	s.Generation = c.current.Load().Generation + 1
	c.current.Store(s)
	if stats.AdmissionChanged {
		for _, f := range s.Errors {
			c.log.Info("policy left out of admission: it does not compile", "fault", f.Error())
		}
	}
	c.log.V(1).Info("policy snapshot published", "generation", s.Generation, "policies", len(s.Policies()), "exceptions", len(exceptions)+len(celExceptions),
		"policiesCompiled", stats.PoliciesCompiled, "policiesReused", stats.PoliciesReused,
		"exceptionsCompiled", stats.ExceptionsCompiled, "exceptionsReused", stats.ExceptionsReused, "took", time.Since(start))
	c.mu.Lock()
	var listeners []func(*Snapshot)
	if stats.AdmissionChanged {
		listeners = append(listeners, c.listeners...)
	}
	listeners = append(listeners, c.subscribers.All()...)
	c.mu.Unlock()
	for _, fn := range listeners {
		fn(s)
	}
	return nil
}

// publishInstalled stores what a rebuild read and hands it to the
// listeners. It runs before the admission snapshot is published, so a
// controller knows of a policy no later than admission enforces it.
// reportIgnored logs and hands to the OnIgnoredException listeners the
// ignored exceptions not reported at their current generation yet.
func (c *Cache) reportIgnored(ignored []IgnoredException) {
	c.ignoredMu.Lock()
	defer c.ignoredMu.Unlock()
	c.ignoredNow = ignored
	fresh := c.ignoredSeen.fresh(ignored)
	if len(fresh) == 0 {
		return
	}
	c.mu.Lock()
	listeners := append([]func(IgnoredException){}, c.ignoredListeners...)
	c.mu.Unlock()
	for _, ig := range fresh {
		c.log.Info("policy exception ignored", "reason", ig.Reason)
		for _, fn := range listeners {
			fn(ig)
		}
	}
}

func (c *Cache) publishInstalled(policies []kyvernov1.PolicyInterface, exceptions []*kyvernov2.PolicyException, celExceptions []*policiesv1.PolicyException) *Installed {
	in := &Installed{
		Policies:      sortedPolicies(policies),
		Exceptions:    sortedExceptions(exceptions),
		CELExceptions: sortedExceptions(celExceptions),
		Generation:    c.installed.Load().Generation + 1,
	}
	c.installed.Store(in)
	c.readersInstalled(in.Policies)
	c.mu.Lock()
	listeners := append([]func(*Installed){}, c.installedListeners...)
	c.mu.Unlock()
	for _, fn := range listeners {
		fn(in)
	}
	return in
}

// NamespaceLabels returns a namespace's labels from the informer, for
// namespaceSelectors (loader.NamespaceLabelsLoader). The map is the
// informer's own, not a copy: callers only read it (the engine, the
// cleanup controller). A deep copy of the Namespace, managedFields and
// all, was 2.6% of the admission process's CPU at 3,000 reviews a second
// (every review reads its namespace's labels for staged policies).
func (c *Cache) NamespaceLabels(ctx context.Context, namespace string) (map[string]string, error) {
	var ns corev1.Namespace
	if err := c.reader.Get(ctx, types.NamespacedName{Name: namespace}, &ns, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return ns.Labels, nil
}
