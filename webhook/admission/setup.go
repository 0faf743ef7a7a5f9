// Package admission wires the admission controller into a
// controller-runtime manager: the policy cache and the HTTPS server run in
// every replica; certificate renewal and the webhook configuration
// controller run on the leader.
package admission

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/webhook/certs"
	"github.com/charter-dev/charter/webhook/config"
	"github.com/charter-dev/charter/webhook/events"
	"github.com/charter-dev/charter/webhook/metrics"
	"github.com/charter-dev/charter/webhook/promotion"
	"github.com/charter-dev/charter/webhook/server"
	"github.com/charter-dev/charter/webhook/status"
	"github.com/charter-dev/charter/webhook/updaterequest"
	"github.com/charter-dev/charter/webhook/userinfo"
)

// Options configure the admission controller.
type Options struct {
	// Addr is where the HTTPS server listens, e.g. ":9443".
	Addr string
	// DrainDelay is how long the server goes on serving after charter is
	// told to stop (server.Server.DrainDelay); zero stops at once.
	DrainDelay time.Duration
	// URL, when set, is the server's base URL as the API server reaches
	// it out of cluster (https://127.0.0.1:9443); webhooks then use url:
	// and the certificate carries its host. Otherwise webhooks name the
	// Service.
	URL string
	// Namespace is charter's namespace (Secrets, exclusions).
	Namespace string
	// ExcludedNamespaces are left out of the webhooks' namespaceSelector
	// besides kube-system and Namespace, which always are.
	ExcludedNamespaces []string
	// Service and ServicePort name the Service in cluster.
	Service     string
	ServicePort int32
	// Null allows every request without evaluating (benchmark floor).
	Null bool
	// RequestTimeout and MaxRequestBytes bound each request.
	RequestTimeout  time.Duration
	MaxRequestBytes int64
	// MaxInFlight bounds the reviews evaluated at once (server.Options).
	MaxInFlight int
	// Metrics records admission metrics; nil records nothing.
	Metrics *metrics.Recorder
	// Audit receives allowed requests' results for the reports controller.
	Audit server.AuditSink
	// State is the process's shared cluster state (clusterstate.New):
	// admission serves its policy snapshot and hands its loaders to the
	// engine. Required.
	State *clusterstate.State
	// ConfigResync is the webhook configuration controller's period.
	ConfigResync time.Duration
	// StatusResync is the policy status controller's period (default 1 min).
	StatusResync time.Duration
	// ReportingAccess answers what the reports controller may read: the
	// policy status controller writes Kyverno's RBACPermissionsGranted
	// from it (status.WithReportingAccess). Nil: it does not.
	ReportingAccess status.ReportingAccess
	// BackgroundWriter is who carries out ClusterPolicies' generate and
	// mutate-existing rules: /policyvalidate refuses a ClusterPolicy
	// naming a kind it may not write, as Kyverno asks about its background
	// controller (policycheck.WriteFaults). Nil: it is not asked.
	BackgroundWriter *policycheck.Writer
	// AdmissionReader is the identity serving policy admission: this
	// process's own (charter serve). /policyvalidate refuses a policy
	// whose synchronized generate rule names a kind it may not list and
	// get, as Kyverno asks about its admission controller
	// (policycheck.SyncReadFaults). Nil: it is not asked.
	AdmissionReader *policycheck.Writer
	// CleanupDeleter is who carries out ClusterCleanupPolicies:
	// /policyvalidate refuses one matching a kind it may not delete or
	// list, as Kyverno asks about its cleanup controller
	// (policycheck.DeleteFaults). Nil: it is not asked.
	CleanupDeleter *policycheck.Writer
	// ReportsReader is who reads what validate and mutate rules match for
	// reports: /policyvalidate warns of a kind it may not get, list and
	// watch, as Kyverno asks about its reports controller
	// (policycheck.ReadWarnings). Nil: it is not asked.
	ReportsReader *policycheck.Writer
	// CertPropagationDelay and CertTrimGrace time certificate rotation
	// (certs.Renewer's PropagationDelay and TrimGrace); zero means
	// certs.DefaultPropagationDelay and certs.DefaultTrimGrace.
	CertPropagationDelay time.Duration
	CertTrimGrace        time.Duration
	// Events configures the Kubernetes Events of admission decisions.
	Events EventOptions
	// Background configures the UpdateRequests admission creates for
	// generate and mutate-existing rules.
	Background updaterequest.Config
	// DenyDowngrade refuses a namespace's move from
	// charter.dev/enforcement=enforce back to Audit
	// (--promotion-downgrade=deny).
	DenyDowngrade bool
	// ReportsAPI is the report API the promotion gate reads charter's
	// reports from: the primary one of --reports-api (default
	// wgpolicyk8s).
	ReportsAPI policyreport.API
	// ReportsManagedBy is the app.kubernetes.io/managed-by label of
	// charter's reports, which the promotion gate reads
	// (--reports-managed-by; default charter).
	ReportsManagedBy string
	Log              logr.Logger
}

// EventOptions configure admission Events (admission-reports.md §3.3).
type EventOptions struct {
	// Disabled emits no events.
	Disabled bool
	// Omit lists reasons never emitted; nil means events.DefaultOmit
	// (PolicyApplied and PolicySkipped, as Kyverno's chart has it), an
	// empty list omits nothing.
	Omit []string
	// MaxQueued bounds the requests whose events wait to be written
	// (default events.DefaultMaxQueued); beyond it they are dropped.
	MaxQueued int
	// SuccessEvents emits PolicyApplied for requests that passed.
	SuccessEvents bool
	// QPS and Burst rate-limit the event creates (default
	// events.DefaultQPS and events.DefaultBurst).
	QPS   float32
	Burst int
}

// Controller is the admission controller added to a manager.
type Controller struct {
	Cache  *policycache.Cache
	Config *config.Controller
	Status *status.Controller
	// Events is nil when events are disabled.
	Events  *events.Sink
	Renewer *certs.Renewer
	KeyPair *certs.SecretKeyPair
	Handler *server.Server
	// UpdateRequests creates the UpdateRequests of admitted requests.
	UpdateRequests *updaterequest.Generator
	caSecret       string
}

// Setup adds the admission controller's runnables to mgr.
func Setup(mgr manager.Manager, o Options) (*Controller, error) {
	if o.Namespace == "" {
		return nil, errors.New("admission: a namespace is required")
	}
	if o.State == nil {
		return nil, errors.New("admission: the process's cluster state is required")
	}
	if o.Service == "" {
		o.Service = "charter-svc"
	}
	if o.ServicePort == 0 {
		o.ServicePort = 443
	}
	caSecret, tlsSecret := certs.SecretNames(o.Service, o.Namespace)
	serving := certs.Serving{Service: o.Service, Namespace: o.Namespace}
	target := config.Target{Service: o.Service, Namespace: o.Namespace, Port: o.ServicePort}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("admission: webhook URL %q: want https://host[:port]", o.URL)
		}
		host := u.Hostname()
		serving.Hosts = []string{host}
		target = config.Target{URL: o.URL}
		if _, _, err := net.SplitHostPort(o.Addr); err != nil {
			return nil, fmt.Errorf("admission: address %q: %w", o.Addr, err)
		}
	}
	excluded := webhookExcludedNamespaces(o.Namespace, o.ExcludedNamespaces)
	c := &Controller{caSecret: caSecret}
	c.Cache = o.State.Policies
	if o.Metrics != nil {
		c.Cache.OnPolicyChange(func(p kyvernov1.PolicyInterface, change policycache.PolicyChange) {
			o.Metrics.PolicyChanged(p, string(change))
		})
		o.Metrics.SetPolicyInventory(policyInventory(mgr.GetCache(), c.Cache))
	}
	c.KeyPair = &certs.SecretKeyPair{Reader: mgr.GetCache(), Namespace: o.Namespace, Name: tlsSecret}

	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("admission: discovery client: %w", err)
	}
	c.Config = &config.Controller{
		Client:   mgr.GetClient(),
		Resolver: config.NewDiscoveryResolver(dc),
		Policies: func() []kyvernov1.PolicyInterface {
			var out []kyvernov1.PolicyInterface
			for _, p := range c.Cache.Snapshot().Policies() {
				out = append(out, p.Source())
			}
			return out
		},
		Settings: func(ctx context.Context) (config.Settings, error) {
			if !c.Cache.Synced() {
				return config.Settings{}, errors.New("policy cache not synced yet")
			}
			bundle, err := certs.CABundle(ctx, mgr.GetAPIReader(), o.Namespace, caSecret)
			if err != nil {
				return config.Settings{}, err
			}
			return config.Settings{Target: target, CABundle: bundle, ExcludedNamespaces: excluded,
				Promotion: true}, nil
		},
		Interval: o.ConfigResync,
		Log:      o.Log.WithName("webhook-config"),
	}
	c.Cache.OnChange(func(*policycache.Snapshot) { c.Config.Trigger() })
	c.Status = status.New(status.Options{Client: mgr.GetClient(), Reader: mgr.GetCache(), Policies: c.Cache,
		Configured: c.Config.Configured, Interval: o.StatusResync, Log: o.Log.WithName("policy-status")}, status.WithParams(o.State.Params),
		status.WithReportingAccess(o.ReportingAccess))
	if o.State.Params != nil {
		o.State.Params.OnChange(c.Status.Trigger)
	}
	c.Config.OnApplied = c.Status.Trigger
	// Every snapshot, not only those that change admission: it holds the
	// verdict on policies with spec.admission: false too.
	c.Cache.Subscribe(func(*policycache.Snapshot) { c.Status.Trigger() })
	var eventSink server.EventSink
	if !o.Events.Disabled && !o.Null {
		if c.Events, err = newEventSink(mgr, o); err != nil {
			return nil, err
		}
		eventSink = c.Events
	}
	c.Renewer = &certs.Renewer{
		Client: mgr.GetClient(), Namespace: o.Namespace, CASecret: caSecret, TLSSecret: tlsSecret,
		Serving: serving, OnChange: c.Config.Trigger, Log: o.Log.WithName("certs"),
		PropagationDelay: o.CertPropagationDelay, TrimGrace: o.CertTrimGrace,
		// The caBundles published decide when a new CA may sign the served
		// certificate: read them fresh, not from the informer cache.
		Bundles: config.CABundles{Client: mgr.GetClient(), Reader: mgr.GetAPIReader()},
	}
	// Requests are matched by the requester's roles through binding
	// caches indexed by subject.
	if err := userinfo.AddIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	// Promotions are rare and must see the latest results: the gate lists
	// reports from the API server, not from a cache.
	promotionGate := &promotion.Gate{Reports: promotion.ReportReader{Reader: mgr.GetAPIReader(), API: o.ReportsAPI, ManagedBy: o.ReportsManagedBy}, DenyDowngrade: o.DenyDowngrade}
	// Context entries read ConfigMaps and call the API server or a
	// Service as the request is evaluated (clusterstate/loaders). The CEL
	// authorizer is bound at admission only.
	lookups := o.State.Loaders
	lookups.Authorizer = o.State.Authorizer
	var mutator server.Mutator = server.EngineMutator{Loaders: lookups}
	if o.Metrics != nil {
		mutator = meteredMutator(lookups, o.Metrics)
	}
	exceptionNamespaces := c.Cache.ExceptionNamespaces()
	if c.UpdateRequests, err = newUpdateRequests(mgr, o); err != nil {
		return nil, err
	}
	// /policyvalidate asks what Kyverno's policy validation asks the
	// cluster: the kinds it serves, whether this process may list and get
	// what synchronized generate rules write, whether the background
	// controller may write what ClusterPolicies generate and mutate and the cleanup
	// controller delete what ClusterCleanupPolicies match, whether the
	// reports controller may read what rules match (warnings), which
	// GlobalContextEntries are Ready and whether validate.cel expressions
	// type-check against the schemas of the kinds they match (warnings).
	policyCluster := policycheck.NewDiscoveryCluster(dc).WithBackgroundWriter(o.BackgroundWriter).WithAdmissionReader(o.AdmissionReader).WithCleanupDeleter(o.CleanupDeleter).
		WithReportsReader(o.ReportsReader).WithCELTypeChecks()
	if o.State.GlobalContext != nil {
		policyCluster.WithGlobalContext(o.State.GlobalContext)
	}
	handler := server.NewHandler(server.Options{
		Background: c.UpdateRequests,
		Policies:   c.Cache,
		Kinds:      mgr.GetRESTMapper(),
		Roles:      userinfo.CachedResolver{Reader: mgr.GetCache()},
		Loaders:    lookups,
		Mutator:    mutator,
		Filters:    server.DefaultResourceFilters(o.Namespace),
		Metrics:    o.Metrics,
		Audit:      o.Audit,
		Promotion:  promotionGate,
		// /policyvalidate warns of exceptions the cache will ignore.
		ExceptionNamespaces: &exceptionNamespaces,
		// The loaders refuse such policies' calls; admission refuses the
		// policies themselves.
		HTTPInNamespacedPolicies: o.State.HTTPLimits.AllowNamespacedPolicies,
		// /policyvalidate asks discovery for the kinds rules name, as
		// Kyverno's policy validation does.
		Cluster:         policyCluster,
		Events:          eventSink,
		MaxRequestBytes: o.MaxRequestBytes,
		MaxInFlight:     o.MaxInFlight,
		RequestTimeout:  o.RequestTimeout,
		Null:            o.Null,
		Ready: func() error {
			if !c.Cache.Synced() && !o.Null {
				return errors.New("policy cache not synced")
			}
			return c.KeyPair.Ready(context.Background())
		},
		Log: o.Log.WithName("server"),
	})
	c.Handler = &server.Server{Addr: o.Addr, Handler: handler, GetCertificate: c.KeyPair.GetCertificate, DrainDelay: o.DrainDelay, Log: o.Log.WithName("server")}

	// A change to either certificate Secret (deleted, edited) is checked
	// at once, not at the next interval (admission-reports.md §2.7).
	watchSecrets := everyReplica(func(ctx context.Context) error {
		inf, err := mgr.GetCache().GetInformer(ctx, &corev1.Secret{})
		if err != nil {
			return fmt.Errorf("admission: watching certificate Secrets: %w", err)
		}
		trigger := func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if s, ok := obj.(*corev1.Secret); ok && s.Namespace == o.Namespace && (s.Name == caSecret || s.Name == tlsSecret) {
				c.Renewer.Trigger()
			}
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: trigger, UpdateFunc: func(_, obj any) { trigger(obj) }, DeleteFunc: trigger,
		}); err != nil {
			return fmt.Errorf("admission: watching certificate Secrets: %w", err)
		}
		<-ctx.Done()
		return nil
	})
	// The policy cache is the State's: whoever built it added it.
	for _, r := range []manager.Runnable{c.UpdateRequests, everyReplica(c.Handler.Run), c.Renewer, c.Config, c.Status, watchSecrets} {
		if err := mgr.Add(r); err != nil {
			return nil, err
		}
	}
	if c.Events != nil {
		if err := mgr.Add(c.Events); err != nil {
			return nil, err
		}
	}
	return c, nil
}

var _ metrics.EventDrops = (*events.Sink)(nil)

// newEventSink returns the sink of admission Events, writing through a
// client of its own; its drops are counted under
// kyverno_events_dropped_total (and charter_events_queue_dropped_total)
// by o.Metrics.
func newEventSink(mgr manager.Manager, o Options) (*events.Sink, error) {
	w, err := events.NewWriter(mgr.GetConfig(), o.Events.QPS, o.Events.Burst)
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	omit := o.Events.Omit
	if omit == nil {
		omit = events.DefaultOmit
	}
	sink := events.NewSink(events.Options{Writer: w, Source: events.SourceAdmission, MaxQueued: o.Events.MaxQueued,
		Omit: omit, SuccessEvents: o.Events.SuccessEvents, Log: o.Log.WithName("events")})
	o.Metrics.SetEventDrops(sink)
	return sink, nil
}

// everyReplica is a runnable that does not wait for leadership.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (f everyReplica) NeedLeaderElection() bool        { return false }

// updateRequestQPS bounds the UpdateRequest writes of one replica: two
// per triggering request (create, then the Pending status), so a burst
// of a thousand new namespaces is written in seconds, not minutes.
const updateRequestQPS, updateRequestBurst = 200, 400

// newUpdateRequests returns the generator of the UpdateRequests of
// admitted requests, with its own client and rate limit.
func newUpdateRequests(mgr manager.Manager, o Options) (*updaterequest.Generator, error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.QPS, cfg.Burst = updateRequestQPS, updateRequestBurst
	cl, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return nil, fmt.Errorf("admission: UpdateRequest client: %w", err)
	}
	g := updaterequest.NewGenerator(cl, o.Namespace, o.State.Loaders, 0, o.Log.WithName("updaterequests"))
	g.Config = o.Background
	if g.Threshold > 0 {
		md, err := metadata.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("admission: UpdateRequest count: %w", err)
		}
		g.Count = updaterequest.NewCount(md, o.Namespace)
		g.Recorder = mgr.GetEventRecorder("charter-admission")
	}
	return g, nil
}

// webhookExcludedNamespaces are the namespaces the webhooks' namespaceSelector
// leaves out: kube-system and charter's own always (charter must never
// block what it needs to run), kube-node-lease (the kubelets' heartbeats:
// blocked, every node goes NotReady) and kube-public, whose requests
// charter's request filter admits unevaluated anyway
// (server.DefaultResourceFilters), so routing them could only let a
// charter outage under failurePolicy Fail block them; then the ones asked
// for, once each.
func webhookExcludedNamespaces(namespace string, asked []string) []string {
	out := []string{"kube-system", namespace, "kube-node-lease", "kube-public"}
	for _, ns := range asked {
		if ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}
