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
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/webhook/certs"
	"github.com/charter-dev/charter/webhook/config"
	"github.com/charter-dev/charter/webhook/metrics"
	"github.com/charter-dev/charter/webhook/policycache"
	"github.com/charter-dev/charter/webhook/server"
)

// Options configure the admission controller.
type Options struct {
	// Addr is where the HTTPS server listens, e.g. ":9443".
	Addr string
	// URL, when set, is the server's base URL as the API server reaches
	// it out of cluster (https://127.0.0.1:9443); webhooks then use url:
	// and the certificate carries its host. Otherwise webhooks name the
	// Service.
	URL string
	// Namespace is charter's namespace (Secrets, exclusions).
	Namespace string
	// Service and ServicePort name the Service in cluster.
	Service     string
	ServicePort int32
	// Null allows every request without evaluating (benchmark floor).
	Null bool
	// RequestTimeout and MaxRequestBytes bound each request.
	RequestTimeout  time.Duration
	MaxRequestBytes int64
	// Metrics records admission metrics; nil records nothing.
	Metrics *metrics.Recorder
	// Audit receives allowed requests' results for the reports controller.
	Audit server.AuditSink
	// ConfigResync is the webhook configuration controller's period.
	ConfigResync time.Duration
	Log          logr.Logger
}

// Controller is the admission controller added to a manager.
type Controller struct {
	Cache    *policycache.Cache
	Config   *config.Controller
	Renewer  *certs.Renewer
	KeyPair  *certs.SecretKeyPair
	Handler  *server.Server
	caSecret string
}

// Setup adds the admission controller's runnables to mgr.
func Setup(mgr manager.Manager, o Options) (*Controller, error) {
	if o.Namespace == "" {
		return nil, errors.New("admission: a namespace is required")
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
	c := &Controller{caSecret: caSecret}
	c.Cache = policycache.New(mgr.GetCache(), o.Log.WithName("policycache"))
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
			return config.Settings{Target: target, CABundle: bundle, ExcludedNamespaces: []string{"kube-system", o.Namespace}}, nil
		},
		Interval: o.ConfigResync,
		Log:      o.Log.WithName("webhook-config"),
	}
	c.Cache.OnChange(func(*policycache.Snapshot) { c.Config.Trigger() })
	c.Renewer = &certs.Renewer{
		Client: mgr.GetClient(), Namespace: o.Namespace, CASecret: caSecret, TLSSecret: tlsSecret,
		Serving: serving, OnChange: c.Config.Trigger, Log: o.Log.WithName("certs"),
	}
	handler := server.NewHandler(server.Options{
		Policies:        c.Cache,
		Loaders:         engine.Loaders{Namespaces: c.Cache},
		Mutator:         server.EngineMutator{Loaders: engine.Loaders{Namespaces: c.Cache}},
		Filters:         server.DefaultResourceFilters(o.Namespace),
		Metrics:         o.Metrics,
		Audit:           o.Audit,
		MaxRequestBytes: o.MaxRequestBytes,
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
	c.Handler = &server.Server{Addr: o.Addr, Handler: handler, GetCertificate: c.KeyPair.GetCertificate, Log: o.Log.WithName("server")}

	for _, r := range []manager.Runnable{c.Cache, everyReplica(c.Handler.Run), c.Renewer, c.Config} {
		if err := mgr.Add(r); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// everyReplica is a runnable that does not wait for leadership.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (f everyReplica) NeedLeaderElection() bool        { return false }
