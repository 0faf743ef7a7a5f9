package background

import (
	"time"

	"github.com/go-logr/logr"

	"github.com/charter-dev/charter/api/charter"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/impersonate"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/generate"
)

// Options configure the background controller.
type Options struct {
	// State is the process's shared cluster state. Required.
	State *clusterstate.State
	// Namespace holds the UpdateRequests and the Lease (charter's
	// namespace). Required.
	Namespace string
	// Workers bound the UpdateRequests and other work items processed at
	// once (default 10, Kyverno's --genWorkers).
	Workers int
	// MaxAttempts is how often an UpdateRequest is tried before it stays
	// Failed (default 5).
	MaxAttempts int
	// RetryBase is the delay after the first failed attempt; each further
	// failure doubles it, up to RetryMax (defaults 1s and 1m).
	RetryBase, RetryMax time.Duration
	// ResyncInterval is how often the leader goes over every policy as if
	// it had just changed, without a new trigger (default 1h, Kyverno's
	// BACKGROUND_SCAN_INTERVAL): synchronized downstream objects are
	// compared again, generateExisting and mutateExistingOnPolicyUpdate
	// rules run for every trigger, a synchronized rule's triggers created
	// after the policy are covered even when admission missed them, and
	// Failed UpdateRequests get one more attempt.
	ResyncInterval time.Duration
	// LeaderElection makes the controller run only while it holds its
	// Lease. Without it, it always runs (tests of two leaders, single
	// replicas).
	LeaderElection bool
	// LeaseName is the controller's own Lease (default charter-background).
	LeaseName string
	// LeaseDuration, RenewDeadline and RetryPeriod time the election
	// (defaults 15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// QPS and Burst bound the controller's API requests (default 200 and
	// 400).
	QPS   float32
	Burst int
	// PolicyServiceAccount is the ServiceAccount, in a namespaced
	// policy's namespace, that the policy's writes impersonate, so that
	// Kubernetes RBAC decides them (default
	// impersonate.DefaultServiceAccount, "charter-policy"; serve
	// --namespaced-policy-service-account). Cluster-scoped policies write
	// with charter's own identity.
	PolicyServiceAccount string
	// Logger receives the controller's logs.
	Logger logr.Logger
	// Results, if set, receives the outcome of every GeneratingPolicy and
	// mutate-existing MutatingPolicy run for a trigger, for the trigger's
	// PolicyReport (cel-policy-types.md §7).
	Results Results
	// Metrics, if set, records every GeneratingPolicy run for a trigger
	// (kyverno_generating_policy_results_total and
	// _execution_duration_seconds).
	Metrics Metrics
}

// Metrics records the background controller's GeneratingPolicy runs.
// *metrics.Recorder (webhook/metrics) implements it; an interface keeps
// this package free of Prometheus and lets the process share one
// recorder.
type Metrics interface {
	// ObserveGenerating is handed the response of a GeneratingPolicy for
	// a trigger, timed (PolicyResponse.Duration), and the admission
	// operation of the UpdateRequest that asked for it ("" for work of a
	// policy change, resync or watch).
	ObserveGenerating(trigger engine.ResourceRef, operation string, p engine.PolicyResponse)
}

// Results takes the background controller's engine responses for a
// trigger to its report. It must not block.
type Results interface {
	Results(trigger generate.ObjectRef, responses []engine.PolicyResponse)
}

// Defaults.
const (
	DefaultWorkers     = 10
	DefaultResync      = time.Hour
	DefaultMaxAttempts = 5
	DefaultLeaseName   = "charter-background"
	DefaultQPS         = 200
	DefaultBurst       = 400
	// FieldManager is the field manager of every write to downstream
	// objects and mutate targets; admission knows the controller's own
	// writes by it (loop protection).
	FieldManager = charter.BackgroundFieldManager
)

func (o Options) withDefaults() Options {
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.ResyncInterval <= 0 {
		o.ResyncInterval = DefaultResync
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.RetryBase <= 0 {
		o.RetryBase = time.Second
	}
	if o.RetryMax <= 0 {
		o.RetryMax = time.Minute
	}
	if o.LeaseName == "" {
		o.LeaseName = DefaultLeaseName
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if o.RenewDeadline <= 0 {
		o.RenewDeadline = 10 * time.Second
	}
	if o.RetryPeriod <= 0 {
		o.RetryPeriod = 2 * time.Second
	}
	if o.QPS <= 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.PolicyServiceAccount == "" {
		o.PolicyServiceAccount = impersonate.DefaultServiceAccount
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o
}
