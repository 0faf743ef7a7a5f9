package reports

import (
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"

	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// Options configure the reports controller. The zero value of every field
// means its default.
type Options struct {
	// BackgroundScanInterval is the time between full rescans of every
	// watched resource (default 1h). A full rescan evaluates every resource
	// again, so results that depend on things outside the resource
	// (namespace labels, ConfigMaps) catch up; it writes only reports whose
	// results changed.
	BackgroundScanInterval time.Duration
	// Workers bounds how many resources are evaluated at once (default 4).
	Workers int
	// WriteWorkers bounds how many report writes are in flight at once
	// (default 16). Writes wait on the API server, not on this process's
	// CPU, so more of them run than evaluations.
	WriteWorkers int
	// APIs are the report APIs written (--reports-api; default
	// wgpolicyk8s only). The first is the primary one, read back by every
	// writer; reports in the others are copies that follow it (see
	// reportClient).
	APIs []policyreport.API
	// ManagedBy is the app.kubernetes.io/managed-by label of the reports
	// written, and the one charter reads as its own
	// (--reports-managed-by): report.ManagedBy (default) or
	// report.KyvernoManagedBy, Kyverno's, for a cluster where charter
	// replaced Kyverno (never while Kyverno runs: both would take the
	// same reports for theirs).
	ManagedBy string
	// AllowedResults keeps only these outcomes in reports (default all).
	AllowedResults report.AllowedResults
	// QPS and Burst bound the controller's API requests, all clients
	// together (default 300 and 600: a first scan of 10,000 resources
	// writes 10,000 reports).
	QPS   float32
	Burst int
	// PageSize is the number of objects a scan lists per page (default 500).
	PageSize int64
	// Admission is the queue the admission webhook of this replica hands
	// its Audit results to; Setup then adds an AdmissionWriter, which runs
	// on every replica, leader or not. Nil means no admission results (the
	// webhook runs elsewhere; results of background policies land in
	// reports at the next background scan of the resource).
	Admission *AdmissionQueue
	// MaxPendingResources bounds the resources whose admission results
	// wait for their report write (default DefaultMaxPendingResources);
	// results of a resource beyond it are dropped, counted and logged.
	MaxPendingResources int
	// State is the process's shared cluster state (clusterstate.New): the
	// controller and its AdmissionWriter take the installed policies, their
	// change notifications, namespace labels and the context-entry loaders
	// from it, and watch no policy themselves. Required.
	State *clusterstate.State
	// Logger receives the controller's logs (default: discarded; Setup
	// uses the manager's logger).
	Logger logr.Logger
	// Metrics, when set, records the rule results and execution times of
	// every background evaluation (kyverno_policy_results_total and
	// kyverno_policy_execution_duration_seconds with
	// rule_execution_cause="background_scan"). Nil records nothing.
	Metrics Metrics
	// ServiceAccount, "namespace/name", is when set the ServiceAccount
	// as which scans list, watch and get the resources they evaluate
	// (impersonated), as Kyverno's reports controller reads with its own
	// ServiceAccount's rights: what RBAC withholds from it is not
	// scanned, and the policy status's RBACPermissionsGranted asks about
	// it (charter dev --reports-service-account). Reports are written
	// with the controller's own identity. Empty (the default, and
	// serve's): the controller's identity.
	ServiceAccount string
	// GoneGracePeriod is how old a report must be before the controller
	// deletes it for want of its resource, when no delete event was seen
	// (default 30s, the longest a webhook may take): the admission writer
	// writes the report of a CREATE before the API server has stored the
	// object, which a GET in between finds missing.
	GoneGracePeriod time.Duration
}

// Metrics records the results of background evaluations.
// *metrics.Recorder (webhook/metrics) implements it; an interface keeps
// this package free of Prometheus, and lets the process share one
// recorder between admission and reports.
type Metrics interface {
	// ObserveScan is handed the response of every evaluation of a
	// resource, made with engine.PolicySet.ValidateTimed so that each
	// policy carries its duration. Resources a scan skips because
	// neither they nor their policies changed were not evaluated and are
	// not handed over.
	ObserveScan(resp *engine.Response)
}

// Defaults.
const (
	DefaultBackgroundScanInterval = time.Hour
	DefaultWorkers                = 4
	DefaultWriteWorkers           = 16
	DefaultQPS                    = 300
	DefaultBurst                  = 600
	DefaultPageSize               = 500
	DefaultGoneGracePeriod        = 30 * time.Second
)

func (o Options) withDefaults() Options {
	if o.BackgroundScanInterval <= 0 {
		o.BackgroundScanInterval = DefaultBackgroundScanInterval
	}
	if o.GoneGracePeriod <= 0 {
		o.GoneGracePeriod = DefaultGoneGracePeriod
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.WriteWorkers <= 0 {
		o.WriteWorkers = DefaultWriteWorkers
	}
	if o.QPS <= 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	if len(o.APIs) == 0 {
		o.APIs = []policyreport.API{policyreport.WGPolicyK8s}
	}
	if o.ManagedBy == "" {
		o.ManagedBy = report.ManagedBy
	}
	return o
}

// AddFlags registers the controller's flags: --reports-api,
// --reports-managed-by, --background-scan-interval, --allowed-results, --reports-workers, --reports-write-workers,
// --reports-qps, --reports-burst.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.APIs = []policyreport.API{policyreport.WGPolicyK8s}
	fs.Var(policyreport.APIsFlag{APIs: &o.APIs}, "reports-api",
		"the report API results are written to: wgpolicyk8s (wgpolicyk8s.io/v1alpha2 PolicyReport, ClusterPolicyReport), openreports (openreports.io/v1alpha1 Report, ClusterReport) or both")
	o.ManagedBy = report.ManagedBy
	fs.Var(ManagedByFlag{&o.ManagedBy}, "reports-managed-by",
		"the app.kubernetes.io/managed-by label of charter's reports: charter, or kyverno (Kyverno's, for a cluster where charter replaced Kyverno: never while Kyverno runs)")
	fs.DurationVar(&o.BackgroundScanInterval, "background-scan-interval", DefaultBackgroundScanInterval,
		"time between full background rescans of every watched resource")
	fs.Var(&allowedResultsFlag{&o.AllowedResults}, "allowed-results",
		"comma-separated results kept in policy reports (pass,fail,warn,error,skip); empty keeps all")
	fs.IntVar(&o.Workers, "reports-workers", DefaultWorkers, "resources the reports controller evaluates at once")
	fs.IntVar(&o.WriteWorkers, "reports-write-workers", DefaultWriteWorkers, "report writes the reports controller has in flight at once")
	fs.Float32Var(&o.QPS, "reports-qps", DefaultQPS, "queries per second of the reports controller's API client")
	fs.IntVar(&o.Burst, "reports-burst", DefaultBurst, "burst of the reports controller's API client")
}

// ManagedByFlag is --reports-managed-by: report.ManagedBy or
// report.KyvernoManagedBy, anything else refused.
type ManagedByFlag struct{ V *string }

func (f ManagedByFlag) String() string {
	if f.V == nil {
		return ""
	}
	return *f.V
}

func (f ManagedByFlag) Set(s string) error {
	v, err := report.ParseManagedBy(s)
	if err != nil {
		return fmt.Errorf("--reports-managed-by: %w", err)
	}
	*f.V = v
	return nil
}

func (f ManagedByFlag) Type() string { return "charter|kyverno" }

type allowedResultsFlag struct{ v *report.AllowedResults }

func (f *allowedResultsFlag) String() string {
	if f.v == nil {
		return ""
	}
	return f.v.String()
}

func (f *allowedResultsFlag) Set(s string) error {
	a, err := report.ParseAllowedResults(s)
	if err != nil {
		return fmt.Errorf("--allowed-results: %w", err)
	}
	*f.v = a
	return nil
}

func (f *allowedResultsFlag) Type() string { return "results" }
