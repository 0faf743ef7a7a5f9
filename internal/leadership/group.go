package leadership

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Group is the leader-only work of a process (certificates, webhook
// configurations, policy status, reports, gitsync) under one Lease, in
// place of controller-runtime's manager election. That election ends the
// process when its Lease is lost: the manager's OnStoppedLeading sends
// "leader election lost" to Start, admission included, so a renewal that
// missed its deadline under load became an outage of every webhook (the
// class of kyverno#16177). A Group instead stops its work when the Lease
// is lost, waits until all of it has returned, campaigns again, and
// starts it anew once elected: two replicas never do it at once, and
// what every replica runs (admission) never stops.
//
// A Group is a manager.Runnable that every replica runs; give the setup
// code the Manager it returns, so that the leader-only runnables it adds
// join the group.
type Group struct {
	lease *Lease

	mu        sync.Mutex
	started   bool
	runnables []manager.Runnable
}

// NewGroup returns a Group campaigning for the Lease o names (o.Enabled
// false: the work runs at once, for as long as the process).
func NewGroup(cfg *rest.Config, o LeaseOptions) *Group {
	g := &Group{}
	g.lease = NewLease(cfg, o, g.term)
	return g
}

// Add adds r, started at every term of leadership with the term's context
// and stopped at its end. r must start again once its Start has returned:
// a controller-runtime controller cannot, so Add refuses one (build it
// with PerTerm).
func (g *Group) Add(r manager.Runnable) error {
	if _, ok := r.(controller.Controller); ok {
		return fmt.Errorf("leadership: %T starts only once, so it could not lead again after a lost Lease: add it through PerTerm, which builds it anew each term", r)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started {
		return errors.New("leadership: a runnable added after the group started")
	}
	g.runnables = append(g.runnables, r)
	return nil
}

// NeedLeaderElection is false: the group elects on its own Lease.
func (g *Group) NeedLeaderElection() bool { return false }

// Start campaigns and runs the group's work at each term, until ctx ends.
func (g *Group) Start(ctx context.Context) error {
	g.mu.Lock()
	g.started = true
	g.mu.Unlock()
	return g.lease.Start(ctx)
}

// term runs every runnable of the group until the term ends or one fails.
func (g *Group) term(ctx context.Context) error {
	g.mu.Lock()
	runnables := g.runnables
	g.mu.Unlock()
	return runAll(ctx, runnables)
}

// runAll starts every runnable with ctx and returns once all have: the
// first error stops the others and is returned.
func runAll(ctx context.Context, runnables []manager.Runnable) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for _, r := range runnables {
		wg.Go(func() {
			if err := r.Start(ctx); err != nil {
				once.Do(func() { first = err })
				cancel()
			}
		})
	}
	wg.Wait()
	return first
}

// Manager returns mgr, except that a runnable added to it that needs
// leader election (says so, or does not say: controller-runtime's
// default) joins the group instead, and a controller-runtime controller
// is refused (see Add). The manager itself must not elect.
func (g *Group) Manager(mgr manager.Manager) manager.Manager {
	return groupManager{Manager: mgr, group: g}
}

type groupManager struct {
	manager.Manager
	group *Group
}

func (m groupManager) Add(r manager.Runnable) error {
	if needsLeader(r) {
		return m.group.Add(r)
	}
	return m.Manager.Add(r)
}

// needsLeader is how controller-runtime's manager sorts a runnable:
// caches and servers run everywhere, others unless they say they need no
// leader.
func needsLeader(r manager.Runnable) bool {
	switch r.(type) {
	case interface{ GetCache() cache.Cache }, *manager.Server:
		return false
	}
	le, ok := r.(manager.LeaderElectionRunnable)
	return !ok || le.NeedLeaderElection()
}

// PerTerm returns a leader-only runnable that, at each Start, runs what
// setup adds to a manager: setup is called with one that keeps the
// runnables added to it (the controllers ctrl.NewControllerManagedBy
// builds, a controller made with New) instead of running them, and they
// run until ctx ends. A controller-runtime controller starts once only,
// and a controller's knowledge of the cluster is stale once another
// replica has led, so each term gets new ones. setup is called once now,
// so that its errors are the caller's, and then at every term after the
// first; it must have no other effect than adding (or register what it
// registers elsewhere only once, outside setup). Controller names repeat
// from term to term: name validation is skipped for them.
func PerTerm(mgr manager.Manager, setup func(manager.Manager) error) (manager.Runnable, error) {
	first, err := capture(mgr, setup)
	if err != nil {
		return nil, err
	}
	return &perTerm{mgr: mgr, setup: setup, next: first}, nil
}

type perTerm struct {
	mgr   manager.Manager
	setup func(manager.Manager) error

	mu   sync.Mutex
	next []manager.Runnable // built and not started yet
}

// NeedLeaderElection is true.
func (p *perTerm) NeedLeaderElection() bool { return true }

func (p *perTerm) Start(ctx context.Context) error {
	p.mu.Lock()
	runnables := p.next
	p.next = nil
	p.mu.Unlock()
	if runnables == nil {
		var err error
		if runnables, err = capture(p.mgr, p.setup); err != nil {
			return err
		}
	}
	return runAll(ctx, runnables)
}

// capture runs setup with a manager that keeps what it is given.
func capture(mgr manager.Manager, setup func(manager.Manager) error) ([]manager.Runnable, error) {
	c := &capturingManager{Manager: mgr}
	if err := setup(c); err != nil {
		return nil, err
	}
	if len(c.runnables) == 0 {
		// Never nil: nil is "build at the next Start".
		return []manager.Runnable{}, nil
	}
	return c.runnables, nil
}

type capturingManager struct {
	manager.Manager
	runnables []manager.Runnable
}

func (c *capturingManager) Add(r manager.Runnable) error {
	c.runnables = append(c.runnables, r)
	return nil
}

func (c *capturingManager) GetControllerOptions() config.Controller {
	o := c.Manager.GetControllerOptions()
	skip := true
	o.SkipNameValidation = &skip
	return o
}
