package cleanup

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/charter-dev/charter/clusterstate/impersonate"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/internal/leadership"
)

// EventSource is the reportingController of the controller's events, as
// Kyverno names its cleanup controller's.
const EventSource = "kyverno-cleanup"

// Setup adds the cleanup controller to the manager. It runs under its own
// Lease (Options.LeaseName) when Options.LeaderElect is set.
func Setup(mgr manager.Manager, o Options) error {
	o.defaults()
	if o.State == nil {
		return errors.New("cleanup: Options.State is required")
	}
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	cfg.UserAgent = rest.DefaultKubernetesUserAgent() + " charter-cleanup"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	impersonated, err := impersonate.New(cfg, o.PolicyServiceAccount)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	actAs, err := serviceAccountClient(cfg, o.ServiceAccount)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	m, err := processMetrics()
	if err != nil {
		return fmt.Errorf("cleanup metrics: %w", err)
	}
	// Events go through a client of their own, so a wave of deletions
	// does not wait behind its own events.
	ecfg := rest.CopyConfig(mgr.GetConfig())
	ecfg.QPS, ecfg.Burst = 1000, 2000
	eventsClient, err := kubernetes.NewForConfig(ecfg)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	c := &controller{
		o: &o, eventsClient: eventsClient,
		// Cleanup policies load apiCall and globalReference entries only
		// (configMap and imageRegistry are refused), and read namespace
		// labels for namespaceSelectors; a DeletingPolicy's conditions
		// call the http (through APICalls), globalContext and resource
		// libraries, as Kyverno's cleanup controller lets them.
		policies: &policyController{o: &o, source: o.State.CleanupPolicies, client: mgr.GetClient(), dyn: dyn, impersonated: impersonated, actAs: actAs, disco: disco,
			loaders: loader.Loaders{APICalls: o.State.Loaders.APICalls, Namespaces: o.State.Loaders.Namespaces, GlobalContext: o.State.Loaders.GlobalContext,
				Resources: o.State.Loaders.Resources}, m: m},
		ttl: newTTLController(&o, meta, disco, kube, nil, m),
	}
	c.policies.now = c.ttl.now
	scheme := mgr.GetScheme()
	c.newRecorder = func(b events.EventBroadcaster) events.EventRecorder { return b.NewRecorder(scheme, EventSource) }
	return mgr.Add(leadership.NewLease(mgr.GetConfig(), leadership.LeaseOptions{
		Enabled: o.LeaderElect, Namespace: o.Namespace, Name: o.LeaseName, RetryPeriod: o.RetryPeriod, Log: o.Log,
	}, c.run))
}

// controller runs the policy and TTL controllers while this replica leads.
type controller struct {
	o            *Options
	eventsClient kubernetes.Interface
	newRecorder  func(events.EventBroadcaster) events.EventRecorder
	policies     *policyController
	ttl          *ttlController
}

func (c *controller) run(ctx context.Context) error {
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: c.eventsClient.EventsV1()})
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		return fmt.Errorf("cleanup events: %w", err)
	}
	defer b.Shutdown()
	rec := c.newRecorder(b)
	c.policies.recorder, c.ttl.recorder = rec, rec

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() { errs <- c.policies.run(ctx) })
	if !c.o.DisableTTL {
		wg.Go(func() { errs <- c.ttl.run(ctx) })
	}
	// The first to fail stops the other.
	var err error
	go func() { wg.Wait(); close(errs) }()
	for e := range errs {
		if e != nil && err == nil {
			err = e
			cancel()
		}
	}
	return err
}

// serviceAccountClient is the client that impersonates Options.ServiceAccount
// ("namespace/name"), nil when it is empty.
func serviceAccountClient(cfg *rest.Config, sa string) (dynamic.Interface, error) {
	if sa == "" {
		return nil, nil
	}
	ns, name, err := impersonate.ParseServiceAccount(sa)
	if err != nil {
		return nil, err
	}
	clients, err := impersonate.New(cfg, name)
	if err != nil {
		return nil, err
	}
	return clients.For(ns)
}
