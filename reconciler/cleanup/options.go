package cleanup

import (
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"

	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/impersonate"
)

// Defaults.
const (
	DefaultPolicyWorkers     = 3
	DefaultTTLWorkers        = 16
	DefaultDiscoveryInterval = 30 * time.Second
	DefaultPageSize          = 500
	// DefaultMaxRetryDelay bounds the backoff of a failed policy run: a
	// failing policy is retried at least this often, forever.
	DefaultMaxRetryDelay = 5 * time.Minute
	DefaultQPS           = 500
)

// Options configure the cleanup controller. The zero value of every field
// means its default.
type Options struct {
	// State is the process's shared cluster state (clusterstate.New): the
	// cleanup policies, namespace labels and the loaders of context
	// entries come from it. Required.
	State *clusterstate.State
	// Namespace is charter's namespace: it holds the Lease and is
	// excluded unless ExcludedNamespaces says otherwise.
	Namespace string
	// ExcludedNamespaces are never touched, by policies or TTLs (default
	// Namespace and kube-system).
	ExcludedNamespaces []string
	// LeaderElect runs the controller under the Lease LeaseName (default
	// "charter-cleanup") in Namespace.
	LeaderElect bool
	LeaseName   string
	RetryPeriod time.Duration
	// PolicyWorkers run policies at once (default 3); TTLWorkers delete
	// expired objects at once (default 16).
	PolicyWorkers int
	TTLWorkers    int
	// DiscoveryInterval is how often the TTL controller rediscovers the
	// kinds it watches; a CRD created or deleted triggers it at once too.
	DiscoveryInterval time.Duration
	// PageSize is the number of objects a policy run lists per page.
	PageSize int64
	// MaxRetryDelay bounds the backoff between runs of a failing policy.
	MaxRetryDelay time.Duration
	// QPS and Burst bound the controller's API requests (default 500 and
	// 1000: a TTL wave of 10,000 objects is 10,000 deletes).
	QPS   float32
	Burst int
	// PolicyServiceAccount is the ServiceAccount, in a namespaced
	// policy's namespace (CleanupPolicy, NamespacedDeletingPolicy), as
	// which the policy's runs list and delete: Kubernetes RBAC decides,
	// never charter's own rights (default
	// impersonate.DefaultServiceAccount). Cluster-scoped policies and TTLs
	// act with charter's identity.
	PolicyServiceAccount string
	// ServiceAccount, "namespace/name", is when set the ServiceAccount as
	// which every cleanup policy's runs list and delete, cluster-scoped
	// and namespaced alike, impersonated instead of charter's identity
	// and PolicyServiceAccount: Kyverno's cleanup controller acts with its
	// own ServiceAccount's rights for every policy, and Kyverno's e2e
	// tests grant them to it or withhold them (charter dev
	// --cleanup-service-account; make conformance-cluster names
	// kyverno/kyverno-cleanup-controller). A namespaced policy still
	// lists only its own namespace. The ServiceAccount must exist. TTL
	// labels keep charter's identity. Empty (the default, and serve's):
	// the identities above.
	ServiceAccount string
	// DisableTTL turns the TTL label off.
	DisableTTL bool
	Log        logr.Logger
}

// AddFlags adds the controller's flags.
func (o *Options) AddFlags(f *pflag.FlagSet) {
	f.StringSliceVar(&o.ExcludedNamespaces, "cleanup-excluded-namespaces", nil, "namespaces cleanup policies and TTL labels never delete in (default charter's namespace and kube-system)")
	f.IntVar(&o.TTLWorkers, "cleanup-ttl-workers", DefaultTTLWorkers, "expired TTL objects deleted at once")
	f.DurationVar(&o.DiscoveryInterval, "cleanup-discovery-interval", DefaultDiscoveryInterval, "how often the kinds carrying TTL labels are rediscovered (a CRD change triggers it at once)")
	f.BoolVar(&o.DisableTTL, "cleanup-disable-ttl", false, "ignore the cleanup.kyverno.io/ttl label")
	f.Float32Var(&o.QPS, "cleanup-qps", DefaultQPS, "API requests per second of the cleanup controller (lists and deletes; burst twice as many)")
}

func (o *Options) defaults() {
	if len(o.ExcludedNamespaces) == 0 {
		o.ExcludedNamespaces = []string{"kube-system"}
		if o.Namespace != "" {
			o.ExcludedNamespaces = append(o.ExcludedNamespaces, o.Namespace)
		}
	}
	if o.LeaseName == "" {
		o.LeaseName = "charter-cleanup"
	}
	if o.PolicyWorkers <= 0 {
		o.PolicyWorkers = DefaultPolicyWorkers
	}
	if o.TTLWorkers <= 0 {
		o.TTLWorkers = DefaultTTLWorkers
	}
	if o.DiscoveryInterval <= 0 {
		o.DiscoveryInterval = DefaultDiscoveryInterval
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.MaxRetryDelay <= 0 {
		o.MaxRetryDelay = DefaultMaxRetryDelay
	}
	if o.QPS <= 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst <= 0 {
		o.Burst = 2 * int(o.QPS)
	}
	if o.PolicyServiceAccount == "" {
		o.PolicyServiceAccount = impersonate.DefaultServiceAccount
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
}

func (o *Options) excluded(namespace string) bool {
	for _, n := range o.ExcludedNamespaces {
		if n == namespace {
			return true
		}
	}
	return false
}
