package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/charter-dev/charter/hack/benchadmission/loadgen"
	"github.com/charter-dev/charter/hack/benchadmission/policymix"
	"github.com/charter-dev/charter/hack/benchadmission/workload"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/webhook/config"
)

const (
	charterNamespace = "charter"
	benchNamespace   = "bench"
	// charterDenial is how the API server words a refusal by charter's
	// fail-closed validating webhook.
	charterDenial = `admission webhook "` + config.ValidateWebhookFail + `" denied the request`
)

// apiOptions configure the apiserver mode.
type apiOptions struct {
	policyDir    string
	noncompliant float64
	rate         float64
	clients      int
	duration     time.Duration // per target, over every round
	warmup       time.Duration
	rounds       int
	charter      string
	keepLogs     bool
}

func (o apiOptions) validate() error {
	var errs []error
	if o.rate < 0 || (o.rate > 0 && o.rate*o.duration.Seconds() < 1) || o.duration <= 0 {
		errs = append(errs, fmt.Errorf("-api-rate %v over -api-duration %s: no request to send", o.rate, o.duration))
	}
	if o.rounds < 1 || (o.rate > 0 && o.rate*(o.duration/time.Duration(max(o.rounds, 1))).Seconds() < 1) {
		errs = append(errs, fmt.Errorf("-api-rounds %d over -api-duration %s: want at least 1 round with a request in it", o.rounds, o.duration))
	}
	if o.clients < 1 {
		errs = append(errs, fmt.Errorf("-api-clients %d: want at least 1", o.clients))
	}
	if o.warmup < 0 {
		errs = append(errs, fmt.Errorf("-api-warmup %s: want 0 or more", o.warmup))
	}
	return errors.Join(errs...)
}

// apiBench is one apiserver-mode run: the control plane's client and the
// Pods sent to each kind of target.
type apiBench struct {
	o  apiOptions
	cs kubernetes.Interface
}

// apiTarget is what a round sends: Pods in one namespace, and whether
// charter decides on them there.
type apiTarget struct {
	name    string
	charter bool
	pods    []workload.Pod
	mix     *workload.Mix
	results loadgen.Results
}

func newAPITarget(name, namespace string, charter bool, noncompliant float64) (*apiTarget, error) {
	t := &apiTarget{name: name, charter: charter, pods: workload.Pods(namespace)}
	var err error
	t.mix, err = workload.NewMix(t.pods, noncompliant)
	return t, err
}

// runAPIServer starts the local control plane and measures dry-run Pod
// creations three ways: before charter is registered at all; then, with
// charter serving admission out of cluster, in alternating rounds of Pods
// in a namespace its webhooks cover and Pods in its own namespace, which
// its webhook configurations exclude so the API server calls no webhook.
// Alternating keeps a shared machine's drift out of the difference. The
// control plane and charter are stopped on every path out, errors and
// interrupts included.
func runAPIServer(ctx context.Context, o apiOptions, p *printer) (err error) {
	if st, err := os.Stat(o.charter); err != nil || st.IsDir() {
		return fmt.Errorf("charter binary %s not found: run make build (or pass -charter)", o.charter)
	}
	policies, err := policymix.EnforcedPolicies(o.policyDir)
	if err != nil {
		return err
	}
	before, err := newAPITarget("none, before charter", benchNamespace, false, o.noncompliant)
	if err != nil {
		return err
	}
	excluded, err := newAPITarget("none", charterNamespace, false, o.noncompliant)
	if err != nil {
		return err
	}
	covered, err := newAPITarget("charter", benchNamespace, true, o.noncompliant)
	if err != nil {
		return err
	}
	root, err := controlplane.ModuleRoot()
	if err != nil {
		return err
	}
	logDir, err := os.MkdirTemp("", "bench-admission-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil || o.keepLogs {
			fmt.Fprintf(os.Stderr, "apiserver: charter's log is kept in %s\n", logDir)
			return
		}
		_ = os.RemoveAll(logDir)
	}()

	fmt.Fprintln(os.Stderr, "apiserver: starting the local control plane")
	cp, err := controlplane.Start(ctx, controlplane.WithCRDs(filepath.Join(root, "config", "crd", "bases")),
		controlplane.WithKeepLogs(o.keepLogs))
	if err != nil {
		return fmt.Errorf("local control plane: %w", err)
	}
	defer func() {
		if err != nil {
			cp.KeepLogs()
		}
		if stopErr := cp.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the local control plane: %w", stopErr))
		}
		if cp.LogsKept() {
			fmt.Fprintf(os.Stderr, "apiserver: the control plane's logs are kept in %s\n", cp.LogDir())
		}
	}()

	cfg := rest.CopyConfig(cp.RESTConfig())
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling: the clients are the load
	cfg.Timeout = 30 * time.Second
	b := &apiBench{o: o}
	if b.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, ns := range []string{charterNamespace, benchNamespace} {
		if _, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	// Installed before charter runs, so its policy webhook is not in the
	// way; with no webhook registered they decide nothing yet.
	gvr := schema.GroupVersionResource{Group: "kyverno.io", Version: "v1", Resource: "clusterpolicies"}
	for _, pol := range policies {
		if _, err := dyn.Resource(gvr).Create(ctx, pol, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("ClusterPolicy %s: %w", pol.GetName(), err)
		}
	}

	// Without any webhook, every Pod is admitted: this also proves the
	// API server's own validation takes each of them.
	if err := b.checkDecisions(ctx, before); err != nil {
		return fmt.Errorf("with no webhook: %w", err)
	}
	if err := b.warmup(ctx, before); err != nil {
		return err
	}
	if err := b.round(ctx, before, o.duration/time.Duration(o.rounds), 0); err != nil {
		return err
	}

	fmt.Fprintln(os.Stderr, "apiserver: starting charter serve --controllers=admission")
	charter, err := startCharter(o.charter, cp.KubeconfigPath(), filepath.Join(logDir, "charter.log"), false)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := charter.stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		// A stopped charter must not leave webhooks the API server calls.
		out, cleanErr := exec.Command(o.charter, "serve", "--cleanup-webhooks",
			"--kubeconfig="+cp.KubeconfigPath(), "--namespace="+charterNamespace).CombinedOutput()
		if cleanErr != nil {
			err = errors.Join(err, fmt.Errorf("charter serve --cleanup-webhooks: %v: %s", cleanErr, out))
		}
	}()
	if err := b.waitForCharter(ctx, charter, covered, 90*time.Second); err != nil {
		return err
	}
	// Charter's namespace is left alone: every Pod there is admitted.
	if err := b.checkDecisions(ctx, excluded); err != nil {
		return fmt.Errorf("in charter's own namespace, which its webhooks exclude: %w", err)
	}
	for _, t := range []*apiTarget{excluded, covered} {
		if err := b.warmup(ctx, t); err != nil {
			return err
		}
	}
	split := &latencySplit{cs: b.cs, charterURL: charter.metricsURL, client: &http.Client{Timeout: 10 * time.Second}}
	splitBefore, err := split.sample(ctx)
	if err != nil {
		return err
	}
	perRound := o.duration / time.Duration(o.rounds)
	for r := range o.rounds {
		order := []*apiTarget{excluded, covered}
		if r%2 == 1 {
			order = []*apiTarget{covered, excluded}
		}
		for _, t := range order {
			if err := b.round(ctx, t, perRound, r); err != nil {
				return err
			}
		}
	}

	splitAfter, err := split.sample(ctx)
	if err != nil {
		return err
	}
	conns, err := connectionsTo(charter.port)
	if err != nil {
		return fmt.Errorf("counting connections to charter: %w", err)
	}

	p.printf("\n%s\n", p.style("Admission through the API server (Pod CREATE, dryRun=All)", bold))
	p.printf("%d Pod Security policies in Enforce; %.0f%% non-compliant Pods; %s; %d CPUs\n",
		len(policies), o.noncompliant*100, o.load(), runtime.NumCPU())
	p.printf("none, before charter: %s before charter runs; then %s each in %d alternating rounds: charter (namespace %s)\n"+
		"and none (namespace %s, which charter's webhook configurations exclude, so no webhook is called); %s warm-up each\n\n",
		perRound, o.duration, o.rounds, benchNamespace, charterNamespace, o.warmup)
	sums := map[*apiTarget]loadgen.Summary{}
	var rows [][]string
	for _, t := range []*apiTarget{before, excluded, covered} {
		s := loadgen.Summarize(t.results.Latencies)
		sums[t] = s
		rows = append(rows, []string{t.name, fmt.Sprint(t.results.Requests()), fmt.Sprintf("%.1f", t.results.Rate()),
			ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max), fmt.Sprint(len(t.results.Errors))})
	}
	sn, sc := sums[excluded], sums[covered]
	rows = append(rows, []string{"added (charter - none)", "", "", signedMS(sc.P50 - sn.P50), signedMS(sc.P95 - sn.P95), signedMS(sc.P99 - sn.P99), "", ""})
	p.table([]string{"WEBHOOK", "REQUESTS", "RATE/S", "P50", "P95", "P99", "MAX", "ERRORS"}, rows)
	for _, t := range []*apiTarget{before, excluded, covered} {
		if len(t.results.Errors) > 0 {
			p.printf("  %s errors: %s\n", t.name, errorBreakdown(t.results.Errors))
		}
	}
	p.printf("\n")
	printSplit(p, splitBefore, splitAfter, conns)
	added := sc.P99 - sn.P99
	p.verdict("p99 added by charter", signedMS(added), "target < 5ms", added < 5*time.Millisecond)
	p.verdict("charter errors", fmt.Sprint(len(covered.results.Errors)), "target 0", len(covered.results.Errors) == 0)
	return nil
}

func (b *apiBench) do(t *apiTarget) loadgen.Func {
	return func(ctx context.Context, i int) error { return b.createPod(ctx, t.mix.At(i), t.charter) }
}

// warmup runs the schedule for the warm-up time and drops the figures.
func (b *apiBench) warmup(ctx context.Context, t *apiTarget) error {
	if b.o.warmup <= 0 {
		return nil
	}
	fmt.Fprintf(os.Stderr, "apiserver: %s, warming up for %s\n", t.name, b.o.warmup)
	_, err := b.run(ctx, t, b.o.warmup, 0)
	return err
}

// run sends t's Pods for d: open loop at the rate, or closed loop when
// the rate is 0.
func (b *apiBench) run(ctx context.Context, t *apiTarget, d time.Duration, offset int) (*loadgen.Results, error) {
	if b.o.rate == 0 {
		return loadgen.RunClosed(ctx, b.o.clients, d, 0, offset, b.do(t))
	}
	return loadgen.Run(ctx, loadgen.Config{Rate: b.o.rate, Duration: d, Workers: b.o.clients, Offset: offset}, b.do(t))
}

// load describes how the clients send.
func (o apiOptions) load() string {
	if o.rate == 0 {
		return fmt.Sprintf("closed loop: %d clients, each sending as soon as its last answer came", o.clients)
	}
	return fmt.Sprintf("open loop at %g/s from %d concurrent clients", o.rate, o.clients)
}

// round runs one measured round against t and adds it to t's figures.
func (b *apiBench) round(ctx context.Context, t *apiTarget, d time.Duration, r int) error {
	fmt.Fprintf(os.Stderr, "apiserver: %s, %s, %s\n", t.name, d, b.o.load())
	runtime.GC()
	res, err := b.run(ctx, t, d, r*100_000)
	if err != nil {
		return err
	}
	t.results.Merge(res)
	return nil
}

// createPod dry-runs the creation of a Pod and checks the decision: where
// charter decides, compliant Pods are admitted and the others refused by
// charter; elsewhere all are admitted.
func (b *apiBench) createPod(ctx context.Context, pod workload.Pod, withCharter bool) error {
	_, err := b.cs.CoreV1().Pods(pod.Pod.Namespace).Create(ctx, pod.Pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	want := !withCharter || pod.Compliant
	switch {
	case err == nil && want:
		return nil
	case err == nil:
		return failed(kindWrong, "non-compliant Pod %s (fails %s) admitted", pod.Pod.Name, pod.Violates)
	case strings.Contains(err.Error(), charterDenial):
		if !want {
			return nil
		}
		return failed(kindWrong, "compliant Pod %s/%s refused: %v", pod.Pod.Namespace, pod.Pod.Name, err)
	}
	return failed(kindAPI, "Pod %s/%s: %v", pod.Pod.Namespace, pod.Pod.Name, err)
}

// checkDecisions creates every Pod once and fails on the first wrong
// answer.
func (b *apiBench) checkDecisions(ctx context.Context, t *apiTarget) error {
	for _, pod := range t.pods {
		if err := b.createPod(ctx, pod, t.charter); err != nil {
			return err
		}
	}
	return nil
}

// waitForCharter waits until charter's webhooks are registered and serve:
// every Pod gets its decision. It gives up when charter exits or after
// timeout, naming the last wrong answer.
func (b *apiBench) waitForCharter(ctx context.Context, c *charterProcess, t *apiTarget, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		last := b.checkDecisions(ctx, t)
		if last == nil {
			return nil
		}
		select {
		case err := <-c.exited:
			c.exited <- err
			return fmt.Errorf("charter serve exited before it admitted anything (%v); its log:\n%s", err, c.logTail(30))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("charter did not take over admission within %s: %v; its log:\n%s", timeout, last, c.logTail(30))
		}
	}
}

// charterProcess is `charter serve --controllers=admission` run out of
// cluster against the local control plane, as a developer runs it.
type charterProcess struct {
	port       int    // of the admission server, on 127.0.0.1
	metricsURL string // its Prometheus metrics
	pprofURL   string // its /debug/pprof/, when started with profiles
	cmd        *exec.Cmd
	exited     chan error
	logPath    string
	logFile    *os.File
}

// startCharter runs `charter serve --controllers=admission` on free
// ports; with profiles, it serves Go's profiles too (--pprof-addr).
func startCharter(bin, kubeconfig, logPath string, profiles bool) (*charterProcess, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	health, err := freePort()
	if err != nil {
		return nil, err
	}
	metricsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	var (
		pprofPort int
		pprofURL  string
	)
	if profiles {
		if pprofPort, err = freePort(); err != nil {
			return nil, err
		}
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{"serve", "--controllers=admission",
		"--kubeconfig=" + kubeconfig,
		"--namespace=" + charterNamespace,
		"--webhook-addr=" + addr,
		"--webhook-url=https://" + addr,
		"--metrics-addr=127.0.0.1:" + strconv.Itoa(metricsPort),
		"--health-addr=127.0.0.1:" + strconv.Itoa(health),
		"--leader-elect=false",
	}
	if pprofPort > 0 {
		args = append(args, "--pprof-addr=127.0.0.1:"+strconv.Itoa(pprofPort))
		pprofURL = "http://127.0.0.1:" + strconv.Itoa(pprofPort) + "/debug/pprof/"
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// If this process dies without cleaning up, charter goes with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	c := &charterProcess{port: port, metricsURL: "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics", pprofURL: pprofURL, cmd: cmd, exited: make(chan error, 1), logPath: logPath, logFile: logFile}
	go func() { c.exited <- cmd.Wait() }()
	return c, nil
}

// stop sends SIGTERM, waits for the drain, and kills charter if it takes
// longer than its own shutdown timeout.
func (c *charterProcess) stop() error {
	defer c.logFile.Close()
	select {
	case err := <-c.exited:
		c.exited <- err
		return nil // already gone; waitForCharter reported why
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.exited:
		if err != nil {
			return fmt.Errorf("charter serve exited with %v after SIGTERM; its log: %s", err, c.logPath)
		}
		return nil
	case <-time.After(45 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("charter serve did not stop within 45s of SIGTERM and was killed; its log: %s", c.logPath)
	}
}

// logTail returns the last n lines of charter's log.
func (c *charterProcess) logTail(n int) string {
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
