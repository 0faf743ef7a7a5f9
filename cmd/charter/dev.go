package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/clusterstate/impersonate"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/printer"
	"github.com/charter-dev/charter/internal/reportsserver"
	"github.com/charter-dev/charter/reconciler/reports"
	"github.com/charter-dev/charter/reconciler/reports/report"
	"github.com/charter-dev/charter/webhook/config"
	"github.com/charter-dev/charter/webhook/updaterequest"
)

// Defaults of `charter dev`.
const (
	// defaultCRDDir is where `make manifests` writes charter's CRDs.
	defaultCRDDir = "config/crd/bases"
	// defaultDevPath is the environment dev syncs from the repository.
	defaultDevPath = "environments/dev"
	// devNamespace holds charter's Secrets and the PolicyRepository.
	devNamespace = "charter"
	// devRepositoryName names the PolicyRepository dev creates.
	devRepositoryName = "charter-dev"
)

type devOptions struct {
	kubeconfig string
	crds       []string
	binDir     string
	keepLogs   bool

	// repo is the local Git checkout synced; "" means this checkout.
	repo string
	// path is the folder of repo that is built and applied.
	path string
	// branch is the branch synced; "" means the checkout's current one.
	branch string
	// readyTimeout bounds the wait for the first sync.
	readyTimeout time.Duration
	// noSync leaves the cluster without a PolicyRepository: nothing but
	// what the user applies is installed (make conformance-cluster).
	noSync bool

	webhookPort  int
	receiverAddr string
	metricsAddr  string
	// reportsAPIs are the report APIs written (--reports-api).
	reportsAPIs []policyreport.API
	// reportsManagedBy is the managed-by label of the reports
	// (--reports-managed-by).
	reportsManagedBy string
	// reportsStore is where reports are kept (--reports-store): etcd
	// (as custom resources) or PostgreSQL (behind charter reports-server).
	reportsStore string
	// namespacedPolicyRole is the ClusterRole bound to every namespace's
	// charter-policy ServiceAccount (--namespaced-policy-role); "" binds
	// nothing.
	namespacedPolicyRole string
	// cleanupServiceAccount, "namespace/name", is the ServiceAccount as
	// which the cleanup controller acts for every policy
	// (--cleanup-service-account); "" keeps serve's identities.
	cleanupServiceAccount string
	// reportsServiceAccount, "namespace/name", is the ServiceAccount as
	// which background scans read what they evaluate, and whose rights
	// RBACPermissionsGranted reports (--reports-service-account); ""
	// keeps the dev process's identity.
	reportsServiceAccount string
}

func newDevCommand() *cobra.Command {
	opts := devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole of charter against a local control plane, until Ctrl-C",
		Long: `dev starts a real etcd, kube-apiserver and kube-controller-manager on
this machine (built by 'make controlplane'; no Docker needed), installs
charter's CRDs, and runs
every controller in one process: admission (the API server calls it by
URL), reports and gitsync. It then points a PolicyRepository at this
checkout (file://, path environments/dev, the current branch), waits
until it is Ready, and prints how to try it.

Commit a change to a policy and it reaches the cluster within seconds:
dev watches the branch and asks for a sync when it moves.

With --kubeconfig it uses that cluster instead; on exit it removes
charter's webhook configurations and leaves the cluster running.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			// Ctrl-C on `make run | tee run.log` ends tee too: the next
			// write to its closed pipe must fail, not kill dev before
			// it has stopped the control plane.
			signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
			defer signal.Reset(syscall.SIGPIPE)
			if !cmd.Flags().Changed("crds") {
				opts.crds = []string{resolveDefaultCRDDir()}
			}
			return runDev(ctx, cmd.OutOrStdout(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.kubeconfig, "kubeconfig", "", "use this cluster instead of starting a local control plane")
	f.StringSliceVar(&opts.crds, "crds", []string{defaultCRDDir}, "CRD files or folders to install")
	f.StringVar(&opts.binDir, "bin-dir", "", "folder holding etcd, kube-apiserver and kube-controller-manager (default $KUBEBUILDER_ASSETS, else <repo>/bin)")
	f.BoolVar(&opts.keepLogs, "keep-logs", false, "keep the control plane's work folder (logs, etcd data) on exit")
	f.StringVar(&opts.repo, "repo", "", "local Git checkout to sync policies from (default: this checkout)")
	f.StringVar(&opts.path, "path", defaultDevPath, "folder of the repository to build and apply")
	f.StringVar(&opts.branch, "branch", "", "branch to sync (default: the checkout's current branch)")
	f.DurationVar(&opts.readyTimeout, "ready-timeout", 2*time.Minute, "how long to wait for the first sync")
	f.BoolVar(&opts.noSync, "no-sync", false, "sync no repository: the cluster holds only the policies you apply")
	f.IntVar(&opts.webhookPort, "webhook-port", 0, "port of the admission server on 127.0.0.1 (default: a free port)")
	f.StringVar(&opts.receiverAddr, "receiver-addr", "", "address of the Git push receiver (e.g. 127.0.0.1:9292); empty disables it")
	f.StringVar(&opts.metricsAddr, "metrics-addr", "", "Prometheus metrics address (default: a free port on 127.0.0.1; 0 disables)")
	opts.reportsAPIs = []policyreport.API{policyreport.WGPolicyK8s}
	f.Var(policyreport.APIsFlag{APIs: &opts.reportsAPIs}, "reports-api", "the report API results are written to: wgpolicyk8s, openreports or both (as charter serve --reports-api)")
	opts.reportsManagedBy = report.ManagedBy
	f.StringVar(&opts.namespacedPolicyRole, "namespaced-policy-role", "", "bind this ClusterRole, in every namespace, to the ServiceAccount "+impersonate.DefaultServiceAccount+
		" as which charter acts for the namespace's policies (created if missing), so namespaced generate, mutate-existing and cleanup write as Kyverno's do (make conformance-cluster: cluster-admin, rights within each namespace); default: none, the namespaces' own RBAC decides")
	f.StringVar(&opts.cleanupServiceAccount, "cleanup-service-account", "", "namespace/name of a ServiceAccount (created if missing) as which every cleanup policy and DeletingPolicy lists and deletes, "+
		"as Kyverno's cleanup controller acts with its own rights (make conformance-cluster: kyverno/kyverno-cleanup-controller, which Kyverno's tests grant rights to). "+
		"Namespaced ones (CleanupPolicy, NamespacedDeletingPolicy) then act as this ServiceAccount too, with its rights, not as "+impersonate.DefaultServiceAccount+" of their namespace: "+
		"what RBAC grants in their namespace no longer bounds them (they still select only their own namespace's resources); default: charter's identity, and "+impersonate.DefaultServiceAccount+" of a namespaced policy's namespace")
	f.StringVar(&opts.reportsServiceAccount, "reports-service-account", "", "namespace/name of a ServiceAccount (created if missing, without rights) as which background scans list, watch and get the resources they evaluate, "+
		"as Kyverno's reports controller reads with its own rights: the policies' RBACPermissionsGranted then says what it may not read (a SubjectAccessReview for it), and what it may not read is not scanned; reports are still written by charter; default: the dev process's identity")
	f.StringVar(&opts.reportsStore, "reports-store", reportsStoreEtcd, "where reports are kept: etcd (custom resources), or postgres (a local PostgreSQL behind charter reports-server, an aggregated API)")
	f.Var(reports.ManagedByFlag{V: &opts.reportsManagedBy}, "reports-managed-by", "the app.kubernetes.io/managed-by label of the reports: charter, or kyverno (as charter serve --reports-managed-by; make conformance-cluster sets kyverno)")
	return cmd
}

// resolveDefaultCRDDir finds config/crd/bases from the working directory,
// else from the repository root, so `charter dev` works from any folder of
// a checkout.
func resolveDefaultCRDDir() string {
	if _, err := os.Stat(defaultCRDDir); err == nil {
		return defaultCRDDir
	}
	if root, err := controlplane.ModuleRoot(); err == nil {
		return filepath.Join(root, defaultCRDDir)
	}
	return defaultCRDDir
}

func runDev(ctx context.Context, out io.Writer, opts devOptions) (err error) {
	// envtest logs through controller-runtime before charter's log file
	// exists; dev's own output is the lines below, so that chatter is
	// dropped. The controllers log to a file (see startControllers).
	ctrllog.SetLogger(logr.Discard())

	env := &devEnvironment{out: out, color: printer.ColorEnabled(out)}
	defer func() {
		if stopErr := env.down(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
	}()
	if err := env.up(ctx, opts); err != nil {
		return err
	}
	return env.serve(ctx)
}

// devEnvironment is what `charter dev` runs: a cluster (a local control
// plane it owns, or one given by --kubeconfig) with charter's CRDs, and
// charter's controllers against it.
type devEnvironment struct {
	out   io.Writer
	color bool

	cp             *controlplane.ControlPlane // nil when the cluster is not ours
	cfg            *rest.Config
	kubeconfigPath string
	client         client.Client

	logFile *os.File
	// log writes to logFile.
	log logr.Logger
	// removeGitsyncCache removes gitsync's checkouts once the
	// controllers stopped.
	removeGitsyncCache func()
	// stopControllers stops the manager and waits for it; nil until it runs.
	stopControllers func() error
	// watcher follows the synced branch; nil when there is none.
	watcher *branchWatcher
	// reportsStore is PostgreSQL and the reports server
	// (--reports-store=postgres); nil otherwise.
	reportsStore *reportsserver.Local
}

// up brings the cluster to the point where charter runs against it with
// the dev environment applied.
func (e *devEnvironment) up(ctx context.Context, opts devOptions) error {
	e.title("charter dev")
	var source devSource
	if !opts.noSync {
		var err error
		if source, err = resolveDevSource(opts); err != nil {
			return err
		}
	}
	if err := validateReportsStore(opts.reportsStore, opts.kubeconfig); err != nil {
		return err
	}
	if err := e.connect(ctx, opts); err != nil {
		return err
	}
	if len(opts.crds) > 0 {
		if err := e.installCRDs(ctx, opts); err != nil {
			return err
		}
	}
	if opts.reportsStore == reportsStorePostgres {
		if err := e.startReportsStore(ctx); err != nil {
			return err
		}
	}
	sch, err := serveScheme()
	if err != nil {
		return err
	}
	if e.client, err = client.New(e.cfg, client.Options{Scheme: sch}); err != nil {
		return err
	}
	if err := e.ensureNamespace(ctx); err != nil {
		return err
	}
	if err := e.ensureServiceAccount(ctx, "--reports-service-account", opts.reportsServiceAccount, "background scans read as ServiceAccount %s, with the rights the cluster binds to it"); err != nil {
		return err
	}
	if err := e.ensureServiceAccount(ctx, "--cleanup-service-account", opts.cleanupServiceAccount, "cleanup policies list and delete as ServiceAccount %s, with the rights the cluster binds to it"); err != nil {
		return err
	}
	if err := e.startControllers(ctx, opts); err != nil {
		return err
	}
	if err := e.grantNamespacedPolicies(ctx, opts.namespacedPolicyRole); err != nil {
		return err
	}
	if opts.noSync {
		e.done("kubeconfig: %s", e.kubeconfigPath)
		return nil
	}
	e.watcher = &branchWatcher{dir: source.dir, branch: source.branch}
	if err := e.syncRepository(ctx, source, opts.readyTimeout); err != nil {
		return err
	}
	e.ready(source, opts.reportsAPIs)
	return nil
}

func (e *devEnvironment) connect(ctx context.Context, opts devOptions) error {
	if opts.kubeconfig != "" {
		cfg, err := restConfig(opts.kubeconfig)
		if err != nil {
			return fmt.Errorf("loading --kubeconfig %s: %w", opts.kubeconfig, err)
		}
		e.cfg, e.kubeconfigPath = cfg, opts.kubeconfig
		e.done("using the cluster at %s", cfg.Host)
		return nil
	}

	// kube-controller-manager finishes namespace deletions and collects
	// objects whose owners are gone, as a user's cluster does.
	cpOpts := []controlplane.Option{controlplane.WithKeepLogs(opts.keepLogs), controlplane.WithControllerManager()}
	if opts.binDir != "" {
		cpOpts = append(cpOpts, controlplane.WithBinaryDir(opts.binDir))
	}
	started := time.Now()
	// A failed Start has already stopped whatever it started and says
	// where its logs are, so e.cp is set only once there is a cluster to stop.
	cp := controlplane.New(cpOpts...)
	if err := cp.Start(ctx); err != nil {
		return err
	}
	e.cp = cp
	e.cfg, e.kubeconfigPath = e.cp.RESTConfig(), e.cp.KubeconfigPath()
	if e.cfg.QPS == 0 {
		e.cfg.QPS = -1 // as restConfig: no client-side rate limit
	}
	e.done("control plane started in %s at %s %s", time.Since(started).Round(100*time.Millisecond),
		e.cfg.Host, e.dim("(logs: "+e.cp.LogDir()+")"))
	return nil
}

func (e *devEnvironment) ensureNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: devNamespace}}
	if err := e.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", devNamespace, err)
	}
	return nil
}

// ensureServiceAccount creates the ServiceAccount a flag names
// (--cleanup-service-account, --reports-service-account) and its
// namespace when missing, labelled as dev's grants are, with no rights:
// what it may do is what the cluster binds to it. says is what dev
// prints of it, %s the ServiceAccount.
func (e *devEnvironment) ensureServiceAccount(ctx context.Context, flag, sa, says string) error {
	if sa == "" {
		return nil
	}
	ns, name, err := impersonate.ParseServiceAccount(sa)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	labels := map[string]string{"app.kubernetes.io/managed-by": devGrantManagedBy}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}},
	} {
		if err := e.client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: creating %s: %w", flag, sa, err)
		}
	}
	e.done(says+" %s", sa, e.dim("("+flag+")"))
	return nil
}

// startControllers runs admission, reports and gitsync in this process,
// exactly as `charter serve --controllers=admission,reports,gitsync` would
// out of cluster, logging to a file so the terminal stays readable.
func (e *devEnvironment) startControllers(ctx context.Context, opts devOptions) error {
	logPath, err := e.logToFile()
	if err != nil {
		return err
	}

	port := opts.webhookPort
	if port == 0 {
		if port, err = freeLocalPort(); err != nil {
			return fmt.Errorf("finding a port for the admission server: %w", err)
		}
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	metricsAddr := opts.metricsAddr
	if metricsAddr == "" {
		mport, err := freeLocalPort()
		if err != nil {
			return fmt.Errorf("finding a port for the metrics server: %w", err)
		}
		metricsAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(mport))
	}
	so := serveOptions{
		controllers:     knownControllers,
		namespace:       devNamespace,
		webhookAddr:     addr,
		webhookURL:      "https://" + addr,
		metricsAddr:     metricsAddr,
		healthAddr:      "0",
		leaderElect:     false,
		retryPeriod:     2 * time.Second,
		requestTimeout:  10 * time.Second,
		maxRequestBytes: 7 << 20,
		// Audit results at admission reach the reports at once.
		admissionReports: true,
		// So do what GeneratingPolicies generated and MutatingPolicies
		// patched.
		backgroundReports: true,
		receiverAddr:      opts.receiverAddr,
		gitsyncWorkers:    2,
		// dev's repositories are folders of this machine (file://),
		// synced as fast as a developer commits.
		gitsyncAllowFileURLs: true,
		gitsyncMinInterval:   time.Second,
		// A dev cluster is small: rescan often so reports follow
		// namespace label and ConfigMap changes quickly.
		reports: reportsDevOptions(opts.reportsAPIs, opts.reportsManagedBy),
		// Resync generate and mutate-existing policies every minute too.
		background: backgroundOptions{resyncInterval: time.Minute, threshold: updaterequest.DefaultThreshold},
		// dev trusts every namespace's PolicyExceptions, as Kyverno's
		// --exceptionNamespace=* does; an install trusts charter's only.
		exceptionNamespaces: []string{"*"},
		// dev is run more than once per process by its tests.
		repeatable: true,
		// verifyImages as serve's defaults: cached by digest and check.
		images: defaultImageVerifyOptions(),
	}
	so.cleanup.ServiceAccount = opts.cleanupServiceAccount
	so.reports.ServiceAccount = opts.reportsServiceAccount
	if e.cp != nil {
		// In the control plane's folder, removed with it, even when
		// dev is killed (at the next start: see controlplane).
		so.gitsyncCacheDir = filepath.Join(e.cp.WorkDir(), "gitsync")
	}
	if e.removeGitsyncCache, err = processGitsyncCache(&so); err != nil {
		return err
	}
	mgr, running, err := newControllerManager(e.cfg, so, e.log)
	if err != nil {
		return err
	}
	mgrCtx, cancel := context.WithCancel(ctx)
	exited := make(chan error, 1)
	go func() { exited <- mgr.Start(mgrCtx) }()
	e.stopControllers = func() error {
		cancel()
		return <-exited
	}

	// The controllers are up once the policy cache has synced and the
	// admission server answers; fail fast if the manager gives up.
	deadline := time.After(time.Minute)
	for !running.admission.Cache.Synced() {
		select {
		case err := <-exited:
			e.stopControllers = nil
			return fmt.Errorf("charter's controllers stopped: %v (log: %s)", err, logPath)
		case <-deadline:
			return fmt.Errorf("charter's policy cache did not sync within a minute (log: %s)", logPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	e.done("charter running: admission at https://%s, %s %s", addr, strings.Join(slices.DeleteFunc(slices.Clone(knownControllers), func(c string) bool { return c == controllerAdmission }), ", "), e.dim("(log: "+logPath+")"))
	if metricsAddr != "0" {
		e.done("metrics at http://%s/metrics", metricsAddr)
	}
	return nil
}

// grantNamespacedPolicies starts --namespaced-policy-role's grant, when
// asked for, and says so: it widens what every namespace's policies may
// write.
func (e *devEnvironment) grantNamespacedPolicies(ctx context.Context, role string) error {
	if role == "" {
		return nil
	}
	kube, err := kubernetes.NewForConfig(e.cfg)
	if err != nil {
		return err
	}
	g := namespacedPolicyGrant{kube: kube, serviceAccount: impersonate.DefaultServiceAccount, clusterRole: role,
		log: ctrllog.Log.WithName("namespaced-policy-role")}
	if err := g.start(ctx); err != nil {
		return err
	}
	e.done("namespaced policies act with ClusterRole %s in their namespace: every namespace's ServiceAccount %s is bound to it %s",
		role, impersonate.DefaultServiceAccount, e.dim("(--namespaced-policy-role)"))
	return nil
}

// openLog creates charter.log in the control plane's log folder, or in a
// new temporary folder for a cluster that is not ours (kept on exit).
// logToFile sends klog's and controller-runtime's logs (the controllers',
// the reports server's) to charter's log file, and returns its path.
func (e *devEnvironment) logToFile() (string, error) {
	if e.logFile != nil {
		return e.logFile.Name(), nil
	}
	path, err := e.openLog()
	if err != nil {
		return "", err
	}
	e.log = textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(e.logFile)))
	klog.SetLogger(e.log)
	ctrllog.SetLogger(e.log)
	return path, nil
}

func (e *devEnvironment) openLog() (string, error) {
	dir := ""
	if e.cp != nil {
		dir = e.cp.LogDir()
	} else {
		d, err := os.MkdirTemp("", "charter-dev-")
		if err != nil {
			return "", err
		}
		dir = d
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "charter.log")
	f, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("creating charter's log file: %w", err)
	}
	e.logFile = f
	return path, nil
}

// serve runs until ctx ends, asking for a sync whenever the branch moves
// and printing what became of it.
func (e *devEnvironment) serve(ctx context.Context) error {
	if e.watcher == nil {
		<-ctx.Done()
		fmt.Fprintln(e.out)
		return nil
	}
	e.watcher.run(ctx, func(rev string) {
		if err := requestSync(ctx, e.client, client.ObjectKey{Namespace: devNamespace, Name: devRepositoryName}); err != nil {
			e.fail("commit %s: asking for a sync: %v", shortRevision(rev), err)
			return
		}
		e.syncOutcome(ctx, rev, syncOutcomeTimeout)
	})
	fmt.Fprintln(e.out)
	return nil
}

// down stops what up started: the controllers (and, for a cluster that is
// not ours, their webhook configurations, so it keeps admitting) and the
// control plane.
func (e *devEnvironment) down() error {
	var errs []error
	if e.stopControllers != nil {
		fmt.Fprintln(e.out, "stopping charter...")
		if err := e.stopControllers(); err != nil {
			errs = append(errs, fmt.Errorf("charter's controllers: %w", err))
		}
		if e.cp == nil && e.client != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			if err := config.Cleanup(ctx, e.client); err != nil {
				errs = append(errs, err)
			} else {
				e.done("webhook configurations removed")
			}
			cancel()
		}
	}
	if e.removeGitsyncCache != nil {
		e.removeGitsyncCache()
	}
	if e.reportsStore != nil {
		if err := e.reportsStore.Shutdown(); err != nil {
			errs = append(errs, err)
		}
	}
	if e.logFile != nil {
		_ = e.logFile.Close()
	}
	if e.cp == nil {
		return errors.Join(errs...)
	}
	fmt.Fprintln(e.out, "stopping the control plane...")
	if err := e.cp.Stop(); err != nil {
		return errors.Join(append(errs, err)...)
	}
	if e.cp.LogsKept() {
		e.done("stopped; logs kept in %s", e.cp.LogDir())
	} else {
		e.done("stopped")
	}
	return errors.Join(errs...)
}

func (e *devEnvironment) ready(source devSource, apis []policyreport.API) {
	e.done("kubeconfig: %s", e.kubeconfigPath)
	b := func(s string) string { return printer.Paint(e.color, printer.Bold, s) }
	wd, _ := os.Getwd()
	examples := devExamplesDir(source.dir, wd)
	if examples == "" {
		fmt.Fprintf(e.out, "\nTry:\n\n  %s\n  %s\n  %s\n\n%s\n%s\n",
			b("export KUBECONFIG="+e.kubeconfigPath),
			b("kubectl get cpol"),
			b("kubectl get "+reportsResources(apis)+" -A"),
			e.dim(fmt.Sprintf("%s holds no examples/ folder, nor does %s: charter's example Pods are in charter's repository (examples/pods); apply resources of your own to see the policies act.", source.dir, wd)),
			e.dim("Commit a policy change and it reaches the cluster within seconds. Ctrl-C stops charter dev."))
		return
	}
	samples := relativeToWorkingDir(filepath.Join(examples, "examples", "pods"))
	cleanupSamples := relativeToWorkingDir(filepath.Join(examples, "examples", "cleanup"))
	fmt.Fprintf(e.out, "\nTry:\n\n  %s\n  %s\n  %s   %s\n  %s  %s\n  %s\n  %s  %s\n\n%s\n",
		b("export KUBECONFIG="+e.kubeconfigPath),
		b("kubectl get cpol"),
		b("kubectl apply -f "+filepath.Join(samples, "compliant.yaml")), e.dim("# passes every policy"),
		b("kubectl apply -f "+filepath.Join(samples, "privileged.yaml")), e.dim("# admitted (dev audits); its report lists the failures"),
		b("kubectl get "+reportsResources(apis)+" -A"),
		b("kubectl apply -f "+filepath.Join(cleanupSamples, "ttl-configmap.yaml")), e.dim("# cleanup.kyverno.io/ttl: 20s, deleted 20 s after creation"),
		e.dim("Commit a policy change and it reaches the cluster within seconds. Ctrl-C stops charter dev."))
}

// devExampleFiles are the files the banner's Try lines apply.
var devExampleFiles = []string{"examples/pods/compliant.yaml", "examples/pods/privileged.yaml", "examples/cleanup/ttl-configmap.yaml"}

// devExamplesDir is the folder whose examples/ the banner's Try lines
// name: the synced checkout's, else the working folder's (charter's
// checkout, when --repo names a repository of one's own), else "" (the
// banner then names no file: every file it names exists).
func devExamplesDir(dirs ...string) string {
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		found := true
		for _, f := range devExampleFiles {
			if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f))); err != nil {
				found = false
				break
			}
		}
		if found {
			return dir
		}
	}
	return ""
}

// reportsResources names the reports of the APIs for kubectl get:
// "polr" (PolicyReports), "reports" (OpenReports' Reports) or both.
func reportsResources(apis []policyreport.API) string {
	names := make([]string, 0, len(apis))
	for _, api := range apis {
		if api == policyreport.OpenReports {
			names = append(names, "reports")
		} else {
			names = append(names, "polr")
		}
	}
	if len(names) == 0 {
		return "polr"
	}
	return strings.Join(names, ",")
}

// relativeToWorkingDir shortens path when it is under the working folder.
func relativeToWorkingDir(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

func (e *devEnvironment) title(s string) {
	fmt.Fprintln(e.out, printer.Paint(e.color, printer.Bold, s))
}

func (e *devEnvironment) done(format string, args ...any) {
	fmt.Fprintf(e.out, "  %s %s\n", printer.Paint(e.color, printer.Green, "✓"), fmt.Sprintf(format, args...))
}

func (e *devEnvironment) fail(format string, args ...any) {
	fmt.Fprintf(e.out, "  %s %s\n", printer.Paint(e.color, printer.Red, "✗"), fmt.Sprintf(format, args...))
}

func (e *devEnvironment) dim(s string) string {
	if !e.color {
		return s
	}
	return "\x1b[2m" + s + "\x1b[0m"
}

func joinPaths(paths []string) string {
	if len(paths) == 1 {
		return paths[0]
	}
	return fmt.Sprint(paths)
}

func freeLocalPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
