package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/api/versions"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/impersonate"
	"github.com/charter-dev/charter/clusterstate/loaders"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/internal/clitest"
	"github.com/charter-dev/charter/internal/egress"
	"github.com/charter-dev/charter/internal/leadership"
	"github.com/charter-dev/charter/internal/version"
	"github.com/charter-dev/charter/internal/workdir"
	"github.com/charter-dev/charter/reconciler/background"
	"github.com/charter-dev/charter/reconciler/cleanup"
	"github.com/charter-dev/charter/reconciler/gitsync"
	"github.com/charter-dev/charter/reconciler/gitsync/source"
	"github.com/charter-dev/charter/reconciler/globalcontext"
	"github.com/charter-dev/charter/reconciler/reports"
	"github.com/charter-dev/charter/webhook/admission"
	"github.com/charter-dev/charter/webhook/config"
	"github.com/charter-dev/charter/webhook/events"
	"github.com/charter-dev/charter/webhook/metrics"
	"github.com/charter-dev/charter/webhook/promotion"
	"github.com/charter-dev/charter/webhook/server"
	"github.com/charter-dev/charter/webhook/status"
)

// The controllers serve can run.
const (
	controllerAdmission = "admission"
	controllerReports   = "reports"
	controllerGitSync   = "gitsync"
	// controllerBackground carries out generate and mutate-existing rules
	// (UpdateRequests), under its own Lease.
	controllerBackground = "background"
	// controllerCleanup runs cleanup policies and TTLs, under its own
	// Lease.
	controllerCleanup = "cleanup"
)

var knownControllers = []string{controllerAdmission, controllerReports, controllerGitSync, controllerBackground, controllerCleanup}

type serveOptions struct {
	controllers []string
	kubeconfig  string
	namespace   string
	webhookAddr string
	webhookURL  string
	// webhookExcluded are --webhook-excluded-namespaces.
	webhookExcluded []string
	service         string
	servicePort     int32
	metricsAddr     string
	pprofAddr       string
	healthAddr      string
	leaderElect     bool
	leaseName       string
	retryPeriod     time.Duration
	cleanupWebhooks bool
	nullWebhook     bool
	requestTimeout  time.Duration
	drainDelay      time.Duration
	maxRequestBytes int64
	maxInFlight     int
	auditQueueSize  int
	// admissionReports writes admission's Audit results into the
	// reports (--admission-reports).
	admissionReports bool
	// backgroundReports writes the background controller's
	// GeneratingPolicy and mutate-existing MutatingPolicy results into
	// their triggers' reports (--background-reports).
	backgroundReports bool
	gcPercent         int
	gcPercentSet      bool // --gc-percent given: it beats $GOGC
	events            admission.EventOptions

	// certPropagationDelay and certTrimGrace time certificate rotation
	// (--cert-propagation-delay, --cert-trim-grace); zero means the
	// defaults.
	certPropagationDelay time.Duration
	certTrimGrace        time.Duration

	reports    reports.Options
	cleanup    cleanup.Options
	images     imageVerifyOptions
	background backgroundOptions

	// exceptionNamespaces are --exception-namespaces: where PolicyExceptions
	// are honoured from; nil means charter's own namespace.
	exceptionNamespaces []string
	// httpLimits are the egress guard's settings: --cel-http-blocklist,
	// --cel-http-allowlist, --egress-allow, --egress-max-response-bytes and
	// --allow-http-in-namespaced-policies.
	httpLimits loaders.HTTPLimits
	// promotionDowngrade is --promotion-downgrade: allow or deny.
	promotionDowngrade string

	// reportsServiceAccount is --reports-service-account: the identity of
	// the reports controller when it runs in another process, whose read
	// access the policy status controller checks.
	reportsServiceAccount string
	// policyServiceAccount is --namespaced-policy-service-account: the
	// ServiceAccount background and cleanup writes (and resource.Post, at
	// admission and in scans too) for a namespaced policy impersonate, in
	// its namespace, and whose requests admission takes for
	// the background controller's own for that namespace's policies.
	policyServiceAccount string
	// cleanupServiceAccount is --cleanup-service-account: the identity of
	// the cleanup controller when it runs in another process, whose
	// delete and list rights policy admission and gitsync's pre-apply
	// check ask about for a ClusterCleanupPolicy.
	cleanupServiceAccount string
	// admissionServiceAccount is --admission-service-account: the
	// identity serving policy admission when it is not this process,
	// whose list and get rights gitsync's pre-apply check asks about for
	// a synchronized generate rule.
	admissionServiceAccount string

	gitsyncCacheDir string
	// defaultServiceAccount and noCrossNamespaceRefs confine the
	// PolicyRepositories outside charter's namespace.
	defaultServiceAccount string
	noCrossNamespaceRefs  bool
	gitsyncWorkers        int
	receiverAddr          string
	// gitsyncLimits bound each checkout; gitsyncMinInterval is the
	// fastest a repository syncs; gitsyncAllowFileURLs lets every
	// namespace's repositories read file:// (charter dev).
	gitsyncMaxSize       int64
	gitsyncMaxFiles      int
	gitsyncMinInterval   time.Duration
	gitsyncAllowFileURLs bool

	// repeatable lets one process build this manager more than once
	// (dev's tests do): controller names then repeat, which
	// controller-runtime refuses unless told otherwise.
	repeatable bool
}

func newServeCommand() *cobra.Command {
	o := serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run charter's controllers (admission, reports, gitsync, cleanup) in or out of cluster",
		Long: `serve runs the chosen controllers in one process.

admission: the HTTPS admission server (every replica), the policy cache,
and, on the leader, certificate issue and rotation and the webhook
configurations. Out of cluster, --webhook-url makes the webhooks call the
server by URL (e.g. https://127.0.0.1:9443); in cluster they name the
Service. Validate and mutate rules are enforced at admission, where the CEL
authorizer of validate.cel asks SubjectAccessReviews for the requesting
user (cached 10s). A policy
using a feature charter cannot run in the cluster (validate.assert, ...;
see docs/policies.md) is refused when a rule
of it enforces, and admitted with a warning when it only audits; either
way its status is Ready=False, reason Unsupported.
Cleanup policies are checked too (the schedule with the parser the
cleanup controller runs it with), and a cleanup.kyverno.io/ttl label
value the cleanup controller could not read is refused.

reports: background scans and one PolicyReport per resource (leader).
Admission writes the Audit results of the requests it admits into the same
reports itself (--admission-reports), so the two may run in separate
Deployments, each with its own ServiceAccount; so does the background
controller with what its GeneratingPolicies generated and its
mutate-existing MutatingPolicies patched, in their triggers' reports
(--background-reports).

gitsync: PolicyRepository sync from Git (leader) and, with
--receiver-addr, the push receiver at /hooks/<namespace>/<name> (every
replica). A PolicyRepository in charter's namespace (--namespace) writes
with charter's own identity; one in any other namespace writes as the
ServiceAccount its spec.serviceAccountName names (or
--default-service-account), impersonated, so Kubernetes RBAC decides what
it installs; without either it may write only namespaced objects of its
own namespace. A revision that breaks these rules, or that the API server
refuses to that ServiceAccount, is Stalled and nothing of it is applied.

cleanup: CleanupPolicies and ClusterCleanupPolicies on their schedules,
and objects whose cleanup.kyverno.io/ttl label expired, under its own
Lease (<leader-election-id>-cleanup). charter's namespace and kube-system
are never cleaned up unless --cleanup-excluded-namespaces says otherwise.

background and cleanup act for a namespaced policy (Policy, CleanupPolicy,
NamespacedGeneratingPolicy, NamespacedMutatingPolicy,
NamespacedDeletingPolicy) as the ServiceAccount
--namespaced-policy-service-account of its namespace, impersonated, so
Kubernetes RBAC decides what it writes and deletes; a missing
ServiceAccount or a refused request fails the rule or run, naming both.
Cluster-scoped policies act with charter's own identity.

--cleanup-webhooks deletes charter's webhook configurations and exits, so a
stopped charter never leaves a cluster unable to admit anything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.gcPercentSet = cmd.Flags().Changed("gc-percent")
			return runServe(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.controllers, "controllers", []string{controllerAdmission}, "controllers to run: "+strings.Join(knownControllers, ","))
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration or $KUBECONFIG when empty")
	f.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", "charter"), "charter's namespace (Secrets, leases, excluded from admission)")
	f.StringVar(&o.webhookAddr, "webhook-addr", ":9443", "address of the HTTPS admission server")
	f.StringVar(&o.webhookURL, "webhook-url", "", "out of cluster: base URL the API server uses to reach the admission server")
	f.StringSliceVar(&o.webhookExcluded, "webhook-excluded-namespaces", nil, "namespaces the API server never sends to charter's webhooks (their namespaceSelector), besides kube-system and charter's namespace, which never are")
	f.StringVar(&o.service, "service", "charter-svc", "in cluster: the admission Service's name")
	f.Int32Var(&o.servicePort, "service-port", 443, "in cluster: the admission Service's port")
	f.StringVar(&o.metricsAddr, "metrics-addr", ":8000", "Prometheus metrics address (0 disables)")
	f.StringVar(&o.healthAddr, "health-addr", ":8081", "health probe address (/healthz, /readyz)")
	f.StringVar(&o.pprofAddr, "pprof-addr", "", "address serving Go's profiles (/debug/pprof/: CPU, heap, goroutines, execution trace), as Kyverno's --profile and --profilePort; empty or 0 disables. They tell of the process's insides: bind it to 127.0.0.1")
	f.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader for the leader-only work: certificates, webhook configurations, reports, gitsync; cleanup and background (<leader-election-id>-background) hold Leases of their own")
	f.StringVar(&o.leaseName, "leader-election-id", "charter", "name of the leader election Lease")
	f.DurationVar(&o.retryPeriod, "leader-election-retry-period", 2*time.Second, "leader election retry period; the lease lasts 6x and renewal gives up after 5x")
	f.BoolVar(&o.cleanupWebhooks, "cleanup-webhooks", false, "delete charter's webhook configurations and exit")
	f.BoolVar(&o.nullWebhook, "null-webhook", false, "allow every request without evaluating (benchmark floor)")
	f.DurationVar(&o.requestTimeout, "request-timeout", 10*time.Second, "bound on evaluating one admission request")
	f.DurationVar(&o.drainDelay, "drain-delay", 0, "once told to stop, go on serving admission this long, closing each connection after its response, before shutting down: in a cluster, the time the Service takes to stop routing to this Pod (the chart sets 10s)")
	f.Int64Var(&o.maxRequestBytes, "max-request-bytes", 7<<20, "largest AdmissionReview body accepted")
	f.IntVar(&o.maxInFlight, "max-in-flight", 0, "admission reviews evaluated at once; 32 times as many more wait up to 2s for a slot, the rest are shed with 429 Too Many Requests and the webhook's failurePolicy applies (0: 16 per CPU; negative: no bound)")
	f.IntVar(&o.gcPercent, "gc-percent", serveGCPercent, "garbage collector target (GOGC): a larger value collects less often for more memory; when this flag is not given, $GOGC applies, else this default with admission and Go's 100 without. The soft memory limit is $GOMEMLIMIT, else 85% of the container's memory limit")
	f.BoolVar(&o.backgroundReports, "background-reports", true, "the background controller writes its GeneratingPolicy and mutate-existing MutatingPolicy results (generated-resources, patched-target) into their triggers' PolicyReports")
	f.BoolVar(&o.admissionReports, "admission-reports", true, "admission writes the Audit results of the requests it admits into their PolicyReports, with or without the reports controller in the process (as Kyverno's --admissionReports)")
	f.IntVar(&o.auditQueueSize, "audit-queue-size", reports.DefaultAdmissionQueueSize, "admission results waiting for the reports controller; more are dropped (the next scan restores them)")
	f.StringSliceVar(&o.events.Omit, "omit-events", events.DefaultOmit, "event reasons never emitted (PolicyViolation,PolicyApplied,PolicySkipped,PolicyError); empty emits all")
	f.IntVar(&o.events.MaxQueued, "max-queued-events", events.DefaultMaxQueued, "admissions whose events wait to be written; more are dropped and counted")
	f.BoolVar(&o.events.SuccessEvents, "generate-success-events", false, "emit PolicyApplied events for requests that passed")
	f.BoolVar(&o.events.Disabled, "disable-events", false, "emit no Kubernetes Events for admission decisions")
	f.Float32Var(&o.events.QPS, "events-rate-limit-qps", events.DefaultQPS, "event creates per second at most (as Kyverno's --eventsRateLimitQPS); what waits beyond --max-queued-events is dropped and counted")
	f.IntVar(&o.events.Burst, "events-rate-limit-burst", events.DefaultBurst, "event creates at once above --events-rate-limit-qps (as Kyverno's --eventsRateLimitBurst)")
	f.StringSliceVar(&o.exceptionNamespaces, "exception-namespaces", nil,
		"namespaces whose PolicyExceptions are honoured, by every controller; \"*\" honours them from every namespace (Kyverno's --exceptionNamespace=*). "+
			"An exception exempts what its match selects in any namespace, so trust only the platform team's namespace. "+
			"Exceptions from elsewhere are ignored, with a Warning event on them; an empty value honours none. Default: charter's --namespace")
	f.StringSliceVar(&o.httpLimits.Blocklist, "cel-http-blocklist", loaders.DefaultHTTPBlocklist,
		"hosts, addresses, CIDR ranges and "+egress.NodeAddresses+" (this node's own addresses) that no outbound call may reach: apiCall service URLs, the CEL http library, GlobalContextEntry apiCalls, image registries and Rekor. Checked on the URL, on every redirect and on the address dialled; an empty value blocks nothing")
	f.StringSliceVar(&o.httpLimits.Allowlist, "cel-http-allowlist", nil,
		"URL prefixes (scheme://host[:port][/path], compared parsed, path by whole segments) that are the only ones a policy's calls may name: apiCall service URLs, the CEL http library, GlobalContextEntry apiCalls (not image registries); the blocklist still applies. Empty allows any")
	f.StringSliceVar(&o.httpLimits.AllowedAddresses, "egress-allow", nil,
		"addresses let through despite --cel-http-blocklist: address, address:port ([v6]:port) or CIDR range, e.g. 127.0.0.1:5000 for a registry on loopback. Empty: none")
	f.Int64Var(&o.httpLimits.MaxResponseBytes, "egress-max-response-bytes", egress.DefaultMaxResponseBytes,
		"largest answer read from an apiCall service URL, the CEL http library or a GlobalContextEntry apiCall")
	f.BoolVar(&o.httpLimits.AllowNamespacedPolicies, "allow-http-in-namespaced-policies", false,
		"namespaced policies may call out: the CEL http library (NamespacedValidatingPolicy, ...) and apiCall service URLs (Policy, CleanupPolicy); off, as Kyverno's --allowHTTPInNamespacedPolicies, such a policy is refused at admission (and by the GitOps check), naming each field, and its calls fail")
	f.StringVar(&o.promotionDowngrade, "promotion-downgrade", promotion.DowngradeAllow,
		"whether a namespace labelled charter.dev/enforcement=enforce may go back to Audit (label set to audit or removed): allow (with a Warning event on the Namespace naming the user) or deny")
	addCertFlags(f, &o)
	addImageVerifyFlags(f, &o.images)
	o.reports.AddFlags(f)
	o.cleanup.AddFlags(f)
	o.background.addFlags(f)
	f.StringVar(&o.policyServiceAccount, "namespaced-policy-service-account", impersonate.DefaultServiceAccount,
		"ServiceAccount, in a namespaced policy's namespace, that charter impersonates for the policy's writes and deletes (Policy, CleanupPolicy, Namespaced*Policy; background and cleanup controllers, and resource.Post at admission and in scans): RBAC decides what the policy may do, never charter's own rights. "+
			"Admission takes its writes in a namespace for the background controller's own for that namespace's namespaced policies only (loop protection; cluster-scoped policies still see them as anyone's), so every component must be given the same name")
	f.StringVar(&o.reportsServiceAccount, "reports-service-account", defaultReportsServiceAccount,
		"ServiceAccount (in --namespace) the reports controller runs as when it is not in this process: admission's policy status controller asks with SubjectAccessReviews whether it may get, list and watch each policies.kyverno.io policy's resources, for Kyverno's RBACPermissionsGranted condition; policy admission and gitsync's pre-apply check warn, as Kyverno does, of a ClusterPolicy's or Policy's validate and mutate rules matching a kind it may not get, list and watch")
	f.StringVar(&o.cleanupServiceAccount, "cleanup-service-account", "charter-cleanup",
		"ServiceAccount (in --namespace) the cleanup controller runs as when it is not in this process: policy admission and gitsync's pre-apply check ask with SubjectAccessReviews whether it may delete and list each kind a ClusterCleanupPolicy matches, and refuse the policy otherwise, as Kyverno does (when the controller runs here, this process's own rights are asked)")
	f.StringVar(&o.admissionServiceAccount, "admission-service-account", "charter-admission",
		"ServiceAccount (in --namespace) policy admission runs as when it is not in this process: gitsync's pre-apply check asks with SubjectAccessReviews whether it may list and get each kind a synchronized generate rule writes, and refuses the policy otherwise, as Kyverno does (when admission runs here, this process's own rights are asked)")
	f.StringVar(&o.gitsyncCacheDir, "gitsync-cache-dir", "", "folder for PolicyRepository checkouts (default: a new folder in the temporary folder, removed on exit)")
	f.IntVar(&o.gitsyncWorkers, "gitsync-workers", 2, "PolicyRepositories synced at once")
	f.StringVar(&o.defaultServiceAccount, "default-service-account", "", "ServiceAccount (of the repository's namespace) that gitsync impersonates for a PolicyRepository outside charter's namespace whose spec.serviceAccountName is empty")
	f.BoolVar(&o.noCrossNamespaceRefs, "no-cross-namespace-refs", false, "a PolicyRepository outside charter's namespace may write only namespaced objects of its own namespace, whatever its ServiceAccount may do")
	f.StringVar(&o.receiverAddr, "receiver-addr", "", "address of the Git push receiver (/hooks/<namespace>/<name>); empty disables it")
	f.Int64Var(&o.gitsyncMaxSize, "gitsync-max-repository-size", gitsync.DefaultMaxRepositorySize, "most bytes one PolicyRepository checkout may hold, Git objects included; a larger revision stalls with reason LimitExceeded; 0 for no limit")
	f.IntVar(&o.gitsyncMaxFiles, "gitsync-max-files", gitsync.DefaultMaxFiles, "most files one PolicyRepository checkout may hold; a revision with more stalls with reason LimitExceeded; 0 for no limit")
	f.DurationVar(&o.gitsyncMinInterval, "gitsync-min-interval", gitsync.DefaultMinInterval, "shortest spec.interval and spec.retryInterval a PolicyRepository syncs at; a shorter one is raised to it, and its Ready message says so")
	f.BoolVar(&o.gitsyncAllowFileURLs, "gitsync-allow-file-urls", false, "let PolicyRepositories of every namespace use file:// URLs, which read this machine's disk (charter dev sets it); without it only those in charter's namespace may")
	return cmd
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// restConfig loads --kubeconfig, else the in-cluster configuration or
// $KUBECONFIG. Either way client-side rate limiting is off, as
// controller-runtime has it: the API server's priority and fairness
// protects it, and client-go's default of 5 requests a second would make a
// 500-policy sync take minutes. The reports controller sets its own
// limits (--reports-qps).
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return ctrl.GetConfig()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	return cfg, nil
}

func serveScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, versions.AddToScheme, gitopsv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func runServe(ctx context.Context, o serveOptions) error {
	if err := checkControllers(o.controllers); err != nil {
		return err
	}
	if _, err := exceptionNamespaces(o); err != nil {
		return err
	}
	if err := o.httpLimits.Validate(); err != nil {
		return fmt.Errorf("egress (--cel-http-blocklist, --cel-http-allowlist, --egress-allow): %w", err)
	}
	if o.promotionDowngrade != promotion.DowngradeAllow && o.promotionDowngrade != promotion.DowngradeDeny {
		return fmt.Errorf("--promotion-downgrade: %q: want %s or %s", o.promotionDowngrade, promotion.DowngradeAllow, promotion.DowngradeDeny)
	}
	if err := o.images.check(o.requestTimeout); err != nil {
		return err
	}
	if err := o.background.check(); err != nil {
		return err
	}
	log := textlogger.NewLogger(textlogger.NewConfig())
	ctrl.SetLogger(log)
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	if o.cleanupWebhooks {
		sch, err := serveScheme()
		if err != nil {
			return err
		}
		cl, err := client.New(cfg, client.Options{Scheme: sch})
		if err != nil {
			return err
		}
		if err := config.Cleanup(ctx, cl); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "charter's webhook configurations deleted")
		return nil
	}

	gc := serveGCSettings(o.gcPercent, o.gcPercentSet, slices.Contains(o.controllers, controllerAdmission), os.Getenv, cgroupMemoryLimit)
	gc.apply()
	log.Info("garbage collector", "settings", gc.why)

	removeCache, err := processGitsyncCache(&o)
	if err != nil {
		return err
	}
	defer removeCache()
	mgr, _, err := newControllerManager(cfg, o, log)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// gitsyncCachePattern names the checkout folders charter processes make
// for themselves in the temporary folder.
const gitsyncCachePattern = "charter-gitsync-*"

// processGitsyncCache gives gitsync a checkout folder of this process's
// own when --gitsync-cache-dir is not set, and returns what removes it once
// the manager has stopped. One folder shared by every charter on a machine
// (as <temp>/charter-gitsync was) let one process remove the checkout
// another was applying, and was refused to a second user. The folder is
// locked while this process runs, so the checkouts of a charter killed
// before it could remove them (SIGKILL) are removed by the next one to
// start, as the control plane's work folders are.
func processGitsyncCache(o *serveOptions) (remove func(), err error) {
	if o.gitsyncCacheDir != "" || !slices.Contains(o.controllers, controllerGitSync) {
		return func() {}, nil
	}
	// Failing to clean someone's leftovers is no reason not to start.
	_, _ = workdir.RemoveStale("", gitsyncCachePattern)
	dir, err := os.MkdirTemp("", strings.TrimSuffix(gitsyncCachePattern, "*"))
	if err != nil {
		return nil, fmt.Errorf("gitsync cache: %w", err)
	}
	lock, err := workdir.Lock(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("gitsync cache: %w", err)
	}
	o.gitsyncCacheDir = dir
	return func() {
		_ = os.RemoveAll(dir)
		_ = workdir.Unlock(lock, false)
	}, nil
}

// exceptionNamespaces reads --exception-namespaces; without it only
// charter's own namespace is trusted.
func exceptionNamespaces(o serveOptions) (policycache.ExceptionNamespaces, error) {
	list := o.exceptionNamespaces
	if list == nil {
		list = []string{o.namespace}
	}
	ns, err := policycache.ParseExceptionNamespaces(list)
	if err != nil {
		return ns, fmt.Errorf("--exception-namespaces: %w", err)
	}
	return ns, nil
}

func checkControllers(names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("--controllers: name at least one of %s", strings.Join(knownControllers, ", "))
	}
	for _, c := range names {
		if !slices.Contains(knownControllers, c) {
			return fmt.Errorf("--controllers: unknown controller %q (known: %s)", c, strings.Join(knownControllers, ", "))
		}
	}
	return nil
}

// processMetrics returns the process's metrics recorder, which admission
// and the reports controller share (both record
// kyverno_policy_results_total, with different causes), registered once
// with controller-runtime's registry however many managers the process
// builds (dev's tests build several).
var processMetrics = sync.OnceValues(func() (*metrics.Recorder, error) {
	return metrics.New(ctrlmetrics.Registry, version.Get().Version)
})

// runningControllers are the controllers newControllerManager added.
type runningControllers struct {
	admission *admission.Controller // nil unless admission runs
}

// newControllerManager builds a manager running the controllers o names,
// ready to Start. serve and dev share it, so `charter dev` runs exactly
// what a deployment runs.
func newControllerManager(cfg *rest.Config, o serveOptions, log logr.Logger) (manager.Manager, *runningControllers, error) {
	sch, err := serveScheme()
	if err != nil {
		return nil, nil, err
	}
	shutdown := 30 * time.Second
	// The manager does not elect: its election ends the process when the
	// Lease is lost (a renewal that missed its deadline under load), and
	// admission with it. The leader-only work runs in a leadership.Group
	// under the --leader-election-id Lease instead, which campaigns again.
	realMgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  sch,
		Logger:                  log,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.healthAddr,
		PprofBindAddress:        o.pprofAddr,
		GracefulShutdownTimeout: &shutdown,
		Controller:              ctrlconfig.Controller{SkipNameValidation: &o.repeatable},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			// Only charter's own Secrets (certificates) are watched; do
			// not cache the cluster's.
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{o.namespace: {}}},
		}},
		// The client reads Secrets from the API server, so gitsync can
		// read a PolicyRepository's credentials in any namespace.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("manager: %w", err)
	}
	leader := leadership.NewGroup(cfg, leadership.LeaseOptions{
		Enabled: o.leaderElect && managerElects(o.controllers), Namespace: o.namespace, Name: o.leaseName,
		LeaseDuration: 6 * o.retryPeriod, RenewDeadline: 5 * o.retryPeriod, RetryPeriod: o.retryPeriod, Log: log.WithName("leader"),
	})
	if err := realMgr.Add(leader); err != nil {
		return nil, nil, err
	}
	// Every setup below adds to mgr: what needs a leader joins the group.
	mgr := leader.Manager(realMgr)
	running := &runningControllers{}

	// Image verification's registries and Rekor pass the egress guard as
	// policies' calls do, without their URL allowlist.
	registryGuard, err := o.httpLimits.RegistryGuard()
	if err != nil {
		return nil, nil, fmt.Errorf("egress: %w", err)
	}
	// One source of installed policies, namespace labels and loaders for
	// every controller of the process: a policy change is watched once.
	var state *clusterstate.State
	if slices.Contains(o.controllers, controllerReports) || slices.Contains(o.controllers, controllerAdmission) || slices.Contains(o.controllers, controllerBackground) || slices.Contains(o.controllers, controllerCleanup) {
		trusted, err := exceptionNamespaces(o)
		if err != nil {
			return nil, nil, err
		}
		stateOpts := []clusterstate.Option{clusterstate.WithExceptionNamespaces(trusted), clusterstate.WithHTTPLimits(o.httpLimits),
			// resource.Post of a namespaced policy, at admission, in scans,
			// in the background and cleanup controllers, acts with its
			// namespace's rights.
			clusterstate.WithNamespacedPolicyServiceAccount(o.policyServiceAccount)}
		if slices.Contains(o.controllers, controllerAdmission) {
			// The process writing policy status tells of ignored
			// exceptions too, from its leader: once, not once per process.
			stateOpts = append(stateOpts, clusterstate.WithExceptionEvents())
			// The CEL authorizer of policies asks SubjectAccessReviews
			// for the requesting user, at admission only.
			stateOpts = append(stateOpts, clusterstate.WithCELAuthorizer(loaders.DefaultAuthorizerOptions))
		}
		if state, err = clusterstate.New(mgr, log.WithName("clusterstate"), stateOpts...); err != nil {
			return nil, nil, err
		}
		// verifyImages rules, ImageValidatingPolicies and the image data
		// policies read (imageRegistry context entries, image.GetMetadata,
		// getImageData), at admission and in the controllers: one
		// registry client, credentials and cache.
		images := o.images.verifier(secretReader{mgr.GetClient()}, registryGuard)
		state.Loaders.ImageVerifier, state.Loaders.Images = images, images
	}

	// The admission results' queue is created first so admission can hand
	// it its Audit results. Its writer runs on every admission replica,
	// with or without the reports controller in the process.
	var audit server.AuditSink
	runsReports := slices.Contains(o.controllers, controllerReports)
	writesAdmission := slices.Contains(o.controllers, controllerAdmission) && o.admissionReports
	writesBackground := slices.Contains(o.controllers, controllerBackground) && o.backgroundReports
	var backgroundResults background.Results
	if runsReports || writesAdmission || writesBackground {
		rec, err := processMetrics()
		if err != nil {
			return nil, nil, fmt.Errorf("metrics: %w", err)
		}
		ro := o.reports
		ro.Logger = log.WithName("reports")
		ro.Metrics = rec
		ro.State = state
		if writesAdmission || writesBackground {
			// One queue and writer for the process's admission and
			// background results.
			q := reports.NewAdmissionQueue(o.auditQueueSize)
			q.OnDrop(rec.AuditDropped)
			ro.Admission = q
			if writesAdmission {
				audit = reportsAuditSink{queue: q}
			}
			if writesBackground {
				backgroundResults = q
			}
		}
		setup := reports.Setup
		if !runsReports {
			setup = reports.SetupAdmissionWriter
		}
		if err := setup(mgr, ro); err != nil {
			return nil, nil, fmt.Errorf("reports: %w", err)
		}
	}
	if slices.Contains(o.controllers, controllerAdmission) {
		rec, err := processMetrics()
		if err != nil {
			return nil, nil, fmt.Errorf("metrics: %w", err)
		}
		access, err := reportingAccess(cfg, o)
		if err != nil {
			return nil, nil, err
		}
		writer, deleter, err := backgroundAndCleanup(cfg, o)
		if err != nil {
			return nil, nil, err
		}
		reader, err := controllerIdentity(cfg, o, controllerAdmission, o.admissionServiceAccount)
		if err != nil {
			return nil, nil, err
		}
		c, err := admission.Setup(mgr, admission.Options{
			Addr: o.webhookAddr, URL: o.webhookURL, Namespace: o.namespace, ExcludedNamespaces: o.webhookExcluded,
			Service: o.service, ServicePort: o.servicePort, Null: o.nullWebhook,
			RequestTimeout: o.requestTimeout, MaxRequestBytes: o.maxRequestBytes, MaxInFlight: o.maxInFlight, DrainDelay: o.drainDelay,
			Metrics: rec, Audit: audit, Events: o.events, Log: log.WithName("admission"), State: state,
			CertPropagationDelay: o.certPropagationDelay, CertTrimGrace: o.certTrimGrace,
			Background:       o.background.updateRequestConfig(context.Background(), cfg, o, log),
			DenyDowngrade:    o.promotionDowngrade == promotion.DowngradeDeny,
			ReportingAccess:  access,
			ReportsReader:    reportsReader(access),
			BackgroundWriter: writer,
			AdmissionReader:  reader,
			CleanupDeleter:   deleter,
			ReportsAPI:       primaryReportsAPI(o.reports.APIs),
			ReportsManagedBy: o.reports.ManagedBy,
		})
		if err != nil {
			return nil, nil, err
		}
		running.admission = c
		// GlobalContextEntry status, from the admission leader's view of
		// the entries (every process loads them; one writes status).
		if err := (&globalcontext.GlobalContextEntryReconciler{Client: mgr.GetClient(), Store: state.GlobalContext}).SetupWithManager(mgr); err != nil {
			return nil, nil, fmt.Errorf("globalcontextentry: %w", err)
		}
		if err := mgr.AddReadyzCheck("admission", admissionReadiness(c.Cache.Synced, c.KeyPair)); err != nil {
			return nil, nil, err
		}
	}
	if slices.Contains(o.controllers, controllerBackground) {
		// GeneratingPolicies are evaluated here only: their
		// kyverno_generating_policy_* metrics come from this controller.
		rec, err := processMetrics()
		if err != nil {
			return nil, nil, fmt.Errorf("metrics: %w", err)
		}
		if _, err := background.Setup(mgr, background.Options{
			State: state, Namespace: o.namespace, Logger: log.WithName("background"),
			LeaderElection: o.leaderElect, LeaseName: ownLease(o.leaseName, controllerBackground), ResyncInterval: o.background.resyncInterval,
			LeaseDuration: 6 * o.retryPeriod, RenewDeadline: 5 * o.retryPeriod, RetryPeriod: o.retryPeriod,
			Results: backgroundResults, Metrics: rec, PolicyServiceAccount: o.policyServiceAccount,
		}); err != nil {
			return nil, nil, fmt.Errorf("background: %w", err)
		}
	}
	if slices.Contains(o.controllers, controllerGitSync) {
		// The pre-apply check asks about the background and cleanup
		// controllers' rights, and admission's reads, as policy admission
		// does.
		writer, deleter, err := backgroundAndCleanup(cfg, o)
		if err != nil {
			return nil, nil, err
		}
		reader, err := controllerIdentity(cfg, o, controllerAdmission, o.admissionServiceAccount)
		if err != nil {
			return nil, nil, err
		}
		access, err := reportingAccess(cfg, o)
		if err != nil {
			return nil, nil, err
		}
		if err := gitsync.Setup(mgr, gitsync.Options{
			CacheDir: o.gitsyncCacheDir, MaxConcurrentReconciles: o.gitsyncWorkers, ReceiverAddr: o.receiverAddr,
			BackgroundWriter: writer, AdmissionReader: reader, CleanupDeleter: deleter, ReportsReader: reportsReader(access),
			Tenancy: gitsync.Tenancy{
				Namespace: o.namespace, DefaultServiceAccount: o.defaultServiceAccount, NoCrossNamespaceRefs: o.noCrossNamespaceRefs,
				AllowFileURLs:        o.gitsyncAllowFileURLs,
				AllowNamespacedCalls: o.httpLimits.AllowNamespacedPolicies,
			},
			Limits:      source.Limits{MaxSize: o.gitsyncMaxSize, MaxFiles: o.gitsyncMaxFiles},
			MinInterval: o.gitsyncMinInterval,
			Egress:      registryGuard,
			PublicTrust: o.images.publicTrust(registryGuard),
			// The gate verifies images with the node's registry
			// credentials only: a repository's suites must not make
			// charter read pull secrets in other namespaces.
			Tests: clitest.RepositoryTests{ImageVerifier: o.images.verifier(nil, registryGuard)},
		}); err != nil {
			return nil, nil, fmt.Errorf("gitsync: %w", err)
		}
	}
	if slices.Contains(o.controllers, controllerCleanup) {
		co := o.cleanup
		co.Namespace, co.LeaderElect, co.LeaseName, co.RetryPeriod = o.namespace, o.leaderElect, ownLease(o.leaseName, controllerCleanup), o.retryPeriod
		co.Log, co.State, co.PolicyServiceAccount = log.WithName("cleanup"), state, o.policyServiceAccount
		if err := cleanup.Setup(mgr, co); err != nil {
			return nil, nil, err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, nil, err
	}
	// /readyz answers for every set of controllers, not only admission's.
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, nil, err
	}
	return mgr, running, nil
}

// ownLease is the Lease of a controller that elects on its own
// (background, cleanup): the --leader-election-id suffixed -<controller>
// unless it already is, so that a Deployment running only that controller
// names it charter-<controller> and holds that one Lease.
func ownLease(id, controller string) string {
	if strings.HasSuffix(id, "-"+controller) {
		return id
	}
	return id + "-" + controller
}

// managerElects says whether the manager's own leader election (the
// --leader-election-id Lease) guards anything the controllers run:
// admission's certificates, webhook configurations and policy status, the
// reports scans and gitsync's syncs do; background and cleanup elect on
// their own Leases, so a process running only those holds no other.
func managerElects(controllers []string) bool {
	return slices.ContainsFunc(controllers, func(c string) bool {
		return c == controllerAdmission || c == controllerReports || c == controllerGitSync
	})
}

// keyPairReady says whether the serving certificate can be served.
type keyPairReady interface {
	Ready(ctx context.Context) error
}

// admissionReadiness is admission's /readyz: a replica is ready once it
// can answer the API server, with every policy loaded and its serving
// certificate at hand; before that the Service must not send it requests
// (a TLS handshake it cannot complete fails the admission).
func admissionReadiness(synced func() bool, keyPair keyPairReady) healthz.Checker {
	return func(req *http.Request) error {
		if !synced() {
			return errors.New("policy cache not synced")
		}
		if err := keyPair.Ready(req.Context()); err != nil {
			return fmt.Errorf("serving certificate: %w", err)
		}
		return nil
	}
}

// defaultReportsServiceAccount is the reports controller's ServiceAccount
// in config/rbac/reports.
const defaultReportsServiceAccount = "charter-reports"

// reportingAccess is how the policy status controller learns what the
// reports controller may read: this process's own rights when the reports
// controller runs here too with its own identity, else a
// SubjectAccessReview for the ServiceAccount its scans read as (the
// reports options' ServiceAccount, or --reports-service-account of
// another Deployment; groups as the API server gives a ServiceAccount's
// token).
func reportingAccess(cfg *rest.Config, o serveOptions) (status.ReportingAccess, error) {
	cs, err := authorizationclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("authorization client: %w", err)
	}
	ns, name := o.namespace, o.reportsServiceAccount
	if slices.Contains(o.controllers, controllerReports) {
		if o.reports.ServiceAccount == "" {
			return status.SelfAccess{Client: cs}, nil
		}
		if ns, name, err = impersonate.ParseServiceAccount(o.reports.ServiceAccount); err != nil {
			return nil, err
		}
	}
	return status.SubjectAccess{Client: cs,
		User:   serviceaccount.MakeUsername(ns, name),
		Groups: append(serviceaccount.MakeGroupNames(ns), user.AllAuthenticated)}, nil
}

// reportsReader is who policy admission and gitsync's pre-apply check ask
// about when they warn of kinds validate and mutate rules match that the
// reports controller may not read: reportingAccess's identity, its
// answers kept a while (status.Cached), as every policy written asks.
func reportsReader(access status.ReportingAccess) *policycheck.Writer {
	user := "charter's reports controller (this process)"
	if sa, ok := access.(status.SubjectAccess); ok {
		user = sa.User
	}
	return &policycheck.Writer{User: user, Access: status.Cached(access)}
}

// backgroundAndCleanup are who policy admission and gitsync's pre-apply
// check ask about when they check what a ClusterPolicy's generate and
// mutate-existing rules write (the background controller, else
// --background-service-account) and what a ClusterCleanupPolicy deletes
// (the cleanup controller, else --cleanup-service-account).
func backgroundAndCleanup(cfg *rest.Config, o serveOptions) (writer, deleter *policycheck.Writer, err error) {
	if writer, err = controllerIdentity(cfg, o, controllerBackground, o.background.serviceAccount); err != nil {
		return nil, nil, err
	}
	if deleter, err = controllerIdentity(cfg, o, controllerCleanup, o.cleanupServiceAccount); err != nil {
		return nil, nil, err
	}
	return writer, deleter, nil
}

// controllerIdentity is the identity controller acts with: this process's
// own when it runs here, else serviceAccount of charter's namespace,
// asked about with SubjectAccessReviews (groups as the API server gives a
// ServiceAccount's token); nil when there is none to ask.
func controllerIdentity(cfg *rest.Config, o serveOptions, controller, serviceAccount string) (*policycheck.Writer, error) {
	cs, err := authorizationclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("authorization client: %w", err)
	}
	if slices.Contains(o.controllers, controller) {
		return &policycheck.Writer{User: "charter's " + controller + " controller (this process)", Access: status.SelfAccess{Client: cs}}, nil
	}
	if serviceAccount == "" {
		return nil, nil
	}
	username := serviceaccount.MakeUsername(o.namespace, serviceAccount)
	return &policycheck.Writer{User: username, Access: status.SubjectAccess{Client: cs, User: username,
		Groups: append(serviceaccount.MakeGroupNames(o.namespace), user.AllAuthenticated)}}, nil
}

// primaryReportsAPI is the report API charter reads its reports back
// from: the first of --reports-api.
func primaryReportsAPI(apis []policyreport.API) policyreport.API {
	if len(apis) == 0 {
		return policyreport.WGPolicyK8s
	}
	return apis[0]
}
