package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/kustomize/api/krusty"
	kustomizetypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/charter-dev/charter/hack/benchadmission/loadgen"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/webhook/server"
)

// The stack modes measure charter as users run it (issue 33, item 4):
// every controller at work beside admission, Events and admission reports
// flowing to a real API server, a namespace promoted to Enforce.
//
//   - dev: `charter dev --path environments/staging` against the bench's
//     local control plane: every controller in one process, the staging
//     environment synced from this checkout by gitsync.
//   - split: as the Helm chart deploys it, `charter serve
//     --controllers=admission` in one process and `charter serve
//     --controllers=reports,background` in another, the staging
//     environment's policies applied by the bench.
//
// In both, namespace bench is labelled charter.dev/enforcement=enforce, so
// the staged Pod Security restricted set enforces there, and the open
// loop posts each review straight to the URL charter registered in its
// ValidatingWebhookConfiguration (/validate/fail, with its CA), in
// alternating rounds with a null webhook in this process. The API
// server's own request counters (apiserver_request_total) say how many
// writes and reads charter's admissions caused.
const (
	stackNamespace = "bench"
	// stackSettle is how long the writes of a rate's last round are given
	// to land before the API server's counters are read.
	stackSettle  = 5 * time.Second
	enforceLabel = "charter.dev/enforcement"
)

// stackGoal is issue 33's goal for the p99 ratio to the null webhook.
func stackGoal(mode string, rate float64) (float64, bool) {
	switch {
	case mode == "split" && rate <= 1000:
		return 1.5, true
	case mode == "split":
		return 2, true
	case mode == "dev" && rate <= 1000:
		return 2, true
	}
	return 0, false
}

// stackResult is one rate's figures.
type stackResult struct {
	rate          float64
	null, charter loadgen.Summary
	requests      int
	errors        int
	denied        int
	answered      float64
	calls         apiCalls // caused during the rate's measured rounds (and stackSettle after)
}

func runStack(ctx context.Context, mode string, d directOptions, a apiOptions, p *printer) (err error) {
	if st, err := os.Stat(a.charter); err != nil || st.IsDir() {
		return fmt.Errorf("charter binary %s not found: run make build (or pass -charter)", a.charter)
	}
	root, err := controlplane.ModuleRoot()
	if err != nil {
		return err
	}
	logDir, err := os.MkdirTemp("", "bench-admission-"+mode+"-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil || a.keepLogs {
			fmt.Fprintf(os.Stderr, "%s: charter's logs are kept in %s\n", mode, logDir)
			return
		}
		_ = os.RemoveAll(logDir)
	}()
	fmt.Fprintf(os.Stderr, "%s: starting the local control plane\n", mode)
	cp, err := controlplane.Start(ctx, controlplane.WithCRDs(filepath.Join(root, "config", "crd", "bases")), controlplane.WithKeepLogs(a.keepLogs))
	if err != nil {
		return fmt.Errorf("local control plane: %w", err)
	}
	defer func() {
		if stopErr := cp.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the local control plane: %w", stopErr))
		}
	}()
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: stackNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("namespace %s: %w", stackNamespace, err)
	}

	var procs []*charterProcess
	defer func() {
		for _, c := range slices.Backward(procs) {
			if stopErr := c.stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
		}
	}()
	switch mode {
	case "dev":
		fmt.Fprintln(os.Stderr, "dev: starting charter dev --path environments/staging")
		c, err := startCharterCmd(a.charter, filepath.Join(logDir, "charter-dev.log"), root, "dev",
			"--kubeconfig="+cp.KubeconfigPath(), "--path=environments/staging", "--metrics-addr=0", "--ready-timeout=10m")
		if err != nil {
			return err
		}
		procs = append(procs, c)
		// dev prints its Try lines once the environment is synced.
		if err := c.waitForLog(ctx, "export KUBECONFIG=", 15*time.Minute); err != nil {
			return err
		}
	case "split":
		if err := applyEnvironment(ctx, cp.RESTConfig(), filepath.Join(root, "environments", "staging")); err != nil {
			return err
		}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: charterNamespace}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("namespace %s: %w", charterNamespace, err)
		}
		fmt.Fprintln(os.Stderr, "split: starting charter serve --controllers=admission and charter serve --controllers=reports,background")
		adm, err := startCharter(a.charter, cp.KubeconfigPath(), filepath.Join(logDir, "charter-admission.log"), d.profileDir != "")
		if err != nil {
			return err
		}
		procs = append(procs, adm)
		health, err := freePort()
		if err != nil {
			return err
		}
		rest, err := startCharterCmd(a.charter, filepath.Join(logDir, "charter-reports-background.log"), root, "serve",
			"--controllers=reports,background", "--kubeconfig="+cp.KubeconfigPath(), "--namespace="+charterNamespace,
			"--metrics-addr=0", "--health-addr=127.0.0.1:"+strconv.Itoa(health), "--leader-elect=false")
		if err != nil {
			return err
		}
		procs = append(procs, rest)
	default:
		return fmt.Errorf("stack mode %q: want dev or split", mode)
	}

	url, caBundle, err := waitForWebhook(ctx, cs, procs, 10*time.Minute)
	if err != nil {
		return err
	}
	if err := promote(ctx, cs, procs, 5*time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s: charter answers at %s; namespace %s labelled %s=enforce\n", mode, url, stackNamespace, enforceLabel)

	w, err := newWorkload(d)
	if err != nil {
		return err
	}
	lo, err := startLoopback()
	if err != nil {
		return err
	}
	defer lo.close()
	targets, err := lo.targets(ctx, d, w, []servedHandler{{"null", labelled("null", server.NewHandler(server.Options{Null: true})), true}})
	if err != nil {
		return err
	}
	charter := &webhookTarget{name: "charter", url: url + "?timeout=10s", reviews: withObjectUID(w.at), client: httpClient(caBundle, d.workers), unchecked: true}
	if err := charter.warm(ctx, min(d.workers, 16)); err != nil {
		return err
	}
	targets = append(targets, charter)

	// The admission process serves its profiles in split mode when
	// profiles are asked for: each of charter's rounds is profiled there.
	var profiled *charterProcess
	if mode == "split" && procs[0].pprofURL != "" {
		profiled = procs[0]
	}
	var results []stackResult
	offset := 0
	for _, rate := range d.rates {
		d.rate = rate
		var (
			before    apiCalls
			beforeErr error
			first     = true
			round     int
			profile   *remoteProfiles
		)
		err := measureRounds(ctx, d, targets, &offset, func(t *webhookTarget, _ time.Time, done bool) {
			if t.null {
				return
			}
			if profiled != nil {
				if !done {
					round++
					profile = profiled.profileRound(ctx, d, fmt.Sprintf("%s-admission-%g-round%d", mode, rate, round), true)
				} else {
					profile.wait()
				}
			}
			if done || !first {
				return
			}
			// Before charter's first measured round: the warm-up's
			// denials are not counted, and the writes it caused have had
			// the null webhook's warm-up to land.
			first = false
			charter.denied.Store(0)
			before, beforeErr = readAPICalls(ctx, cs)
		})
		if err != nil {
			return err
		}
		if beforeErr != nil {
			return beforeErr
		}
		time.Sleep(stackSettle)
		after, err := readAPICalls(ctx, cs)
		if err != nil {
			return err
		}
		r := stackResult{rate: rate, null: loadgen.Summarize(targets[0].results.Latencies), charter: loadgen.Summarize(charter.results.Latencies),
			requests: charter.results.Requests(), errors: len(charter.results.Errors), denied: int(charter.denied.Swap(0)),
			answered: charter.results.Rate(), calls: after.since(before)}
		results = append(results, r)
		printStackRate(p, mode, d, r)
		if r.errors > 0 {
			p.printf("  charter errors: %s\n", errorBreakdown(charter.results.Errors))
		}
	}
	printStackSummary(p, mode, results)
	for _, c := range procs {
		if err := c.alive(); err != nil {
			return err
		}
	}
	return nil
}

// startCharterCmd runs `charter <args>` with its output to logPath, in
// folder dir, as startCharter runs serve.
func startCharterCmd(bin, logPath, dir string, args ...string) (*charterProcess, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s %s: %w", bin, args[0], err)
	}
	c := &charterProcess{cmd: cmd, exited: make(chan error, 1), logPath: logPath, logFile: logFile}
	go func() { c.exited <- cmd.Wait() }()
	return c, nil
}

// alive fails when the process has exited.
func (c *charterProcess) alive() error {
	select {
	case err := <-c.exited:
		c.exited <- err
		return fmt.Errorf("%s exited: %v; its log: %s\n%s", c.cmd.Args[1], err, c.logPath, c.logTail(20))
	default:
		return nil
	}
}

// waitForLog waits until the process's log holds marker.
func (c *charterProcess) waitForLog(ctx context.Context, marker string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := c.alive(); err != nil {
			return err
		}
		if data, err := os.ReadFile(c.logPath); err == nil && strings.Contains(string(data), marker) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("%q not in %s after %s:\n%s", marker, c.logPath, timeout, c.logTail(20))
}

// applyEnvironment builds a kustomize folder, as gitsync does, and
// creates what it holds: ClusterPolicies only (anything else is named
// and refused, so the bench never measures a half-applied environment).
func applyEnvironment(ctx context.Context, cfg *rest.Config, dir string) error {
	// environments/ name the policy files of policies/, outside their
	// folder, as gitsync's build lets them (the whole checkout is the
	// repository).
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = kustomizetypes.LoadRestrictionsNone
	resources, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	gvr := schema.GroupVersionResource{Group: "kyverno.io", Version: "v1", Resource: "clusterpolicies"}
	for _, r := range resources.Resources() {
		m, err := r.Map()
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() != "ClusterPolicy" {
			return fmt.Errorf("%s: %s %s: the split bench applies ClusterPolicies only", dir, u.GetKind(), u.GetName())
		}
		if _, err := dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("ClusterPolicy %s: %w", u.GetName(), err)
		}
	}
	return nil
}

// waitForWebhook waits for charter's ValidatingWebhookConfiguration and
// returns the URL of its /validate/fail webhook and the CA it trusts.
func waitForWebhook(ctx context.Context, cs kubernetes.Interface, procs []*charterProcess, timeout time.Duration) (string, []byte, error) {
	deadline := time.Now().Add(timeout)
	for {
		for _, c := range procs {
			if err := c.alive(); err != nil {
				return "", nil, err
			}
		}
		list, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		if err == nil {
			if url, ca := validateFailWebhook(list.Items); url != "" {
				return url, ca, nil
			}
		}
		if time.Now().After(deadline) {
			return "", nil, fmt.Errorf("no webhook on %s registered after %s (last error: %v)", server.PathValidateFail, timeout, err)
		}
		select {
		case <-ctx.Done():
			return "", nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func validateFailWebhook(configs []admissionregistrationv1.ValidatingWebhookConfiguration) (string, []byte) {
	for _, c := range configs {
		for _, wh := range c.Webhooks {
			u := wh.ClientConfig.URL
			if u == nil || len(wh.ClientConfig.CABundle) == 0 {
				continue
			}
			base, _, _ := strings.Cut(*u, "?")
			if strings.HasSuffix(base, server.PathValidateFail) {
				return base, wh.ClientConfig.CABundle
			}
		}
	}
	return "", nil
}

// promote labels the bench namespace for enforcement, retrying while
// charter's promotion gate or its webhook is not ready to admit it.
func promote(ctx context.Context, cs kubernetes.Interface, procs []*charterProcess, timeout time.Duration) error {
	patch := []byte(`{"metadata":{"labels":{"` + enforceLabel + `":"enforce"}}}`)
	deadline := time.Now().Add(timeout)
	for {
		_, err := cs.CoreV1().Namespaces().Patch(ctx, stackNamespace, types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			return nil
		}
		for _, c := range procs {
			if aerr := c.alive(); aerr != nil {
				return aerr
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("labelling namespace %s %s=enforce: %w", stackNamespace, enforceLabel, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// apiCalls counts the API server's requests by "VERB resource".
type apiCalls map[string]float64

// requestTotal matches a sample of apiserver_request_total.
var requestTotal = regexp.MustCompile(`^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$`)

// readAPICalls reads the API server's request counters.
func readAPICalls(ctx context.Context, cs kubernetes.Interface) (apiCalls, error) {
	data, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver metrics: %w", err)
	}
	return parseAPICalls(string(data)), nil
}

func parseAPICalls(text string) apiCalls {
	out := apiCalls{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		m := requestTotal.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for kv := range strings.SplitSeq(m[1], ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			continue
		}
		out[labels["verb"]+" "+labels["resource"]] += v
	}
	return out
}

// since is what was counted after before.
func (c apiCalls) since(before apiCalls) apiCalls {
	out := apiCalls{}
	for k, v := range c {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// writes sums the creating and changing verbs, by resource.
func (c apiCalls) writes() (total float64, byResource map[string]float64) {
	byResource = map[string]float64{}
	for k, v := range c {
		verb, resource, _ := strings.Cut(k, " ")
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY", "CREATE", "UPDATE":
			total += v
			byResource[resource] += v
		}
	}
	return total, byResource
}

// reads sums the rest (GET, LIST, WATCH).
func (c apiCalls) reads() float64 {
	total, _ := c.writes()
	var all float64
	for _, v := range c {
		all += v
	}
	return all - total
}

func printStackRate(p *printer, mode string, d directOptions, r stackResult) {
	p.printf("\n%s\n", p.style(fmt.Sprintf("Admission as run: MODE=%s at %g/s (POST to charter's registered /validate/fail)", mode, r.rate), bold))
	p.printf("environments/staging, namespace %s promoted to Enforce (the restricted set enforces, the rest audits); %.0f%% non-compliant Pods, each request a Pod of its own name; %s per webhook in %d rounds\n\n",
		stackNamespace, d.noncompliant*100, d.duration, d.rounds)
	p.table([]string{"WEBHOOK", "P50", "P95", "P99", "MAX"}, [][]string{
		{"null", ms(r.null.P50), ms(r.null.P95), ms(r.null.P99), ms(r.null.Max)},
		{"charter", ms(r.charter.P50), ms(r.charter.P95), ms(r.charter.P99), ms(r.charter.Max)},
	})
	p.printf("charter: %d reviews (%.0f/s answered), %d denied (%.0f%%), %d errors\n", r.requests, r.answered, r.denied, 100*float64(r.denied)/float64(max(r.requests, 1)), r.errors)
	total, by := r.calls.writes()
	parts := []string{}
	for _, res := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%s %.3f", res, by[res]/float64(max(r.requests, 1))))
	}
	p.printf("API writes per admission: %.3f (%s); API reads per admission: %.3f (counted by kube-apiserver over the measured rounds and %s after)\n",
		total/float64(max(r.requests, 1)), strings.Join(parts, ", "), r.calls.reads()/float64(max(r.requests, 1)), stackSettle)
	ratio := float64(r.charter.P99) / float64(max(r.null.P99, 1))
	if goal, ok := stackGoal(mode, r.rate); ok {
		p.verdict("p99 charter / p99 null", fmt.Sprintf("%.2fx", ratio), fmt.Sprintf("goal ≤ %gx", goal), ratio <= goal && r.errors == 0)
	} else {
		p.printf("p99 charter / p99 null: %.2fx (no goal at this rate)\n", ratio)
	}
}

func printStackSummary(p *printer, mode string, results []stackResult) {
	if len(results) < 2 {
		return
	}
	p.printf("\n%s\n", p.style(fmt.Sprintf("MODE=%s, every rate (same run)", mode), bold))
	rows := make([][]string, 0, len(results))
	for _, r := range results {
		ratio := float64(r.charter.P99) / float64(max(r.null.P99, 1))
		goal, verdict := "-", "-"
		if g, ok := stackGoal(mode, r.rate); ok {
			goal, verdict = fmt.Sprintf("≤ %gx", g), p.style("met", green)
			if ratio > g || r.errors > 0 {
				verdict = p.style("MISSED", red)
			}
		}
		total, _ := r.calls.writes()
		rows = append(rows, []string{fmt.Sprintf("%g/s", r.rate), ms(r.null.P99), ms(r.charter.P99), fmt.Sprintf("%.2fx", ratio), goal, verdict,
			fmt.Sprintf("%.3f", total/float64(max(r.requests, 1)))})
	}
	p.table([]string{"RATE", "NULL P99", "CHARTER P99", "RATIO", "GOAL", "", "WRITES/ADMISSION"}, rows)
}

// objectUIDPrefix starts the metadata.uid the stack modes give each
// review's Pod.
const objectUIDPrefix = "bench-object-"

// withObjectUID gives request i's Pod the metadata.uid the API server
// assigns before it calls validating webhooks on a CREATE, as
// bench-object-<i>: charter hands the Audit results of an allowed request
// with a uid to its admission-report writer, so the writer works as it
// does in a cluster. The API server never stores these Pods: the writer
// waits for each (bounded, reports.DefaultMaxPendingResources) and writes
// no report.
func withObjectUID(at func(i int) *review) func(i int) *review {
	return func(i int) *review {
		rv := at(i)
		marker := []byte(`"metadata":{`)
		body := bytes.Replace(rv.body, marker, []byte(`"metadata":{"uid":"`+objectUIDPrefix+strconv.Itoa(i)+`",`), 1)
		return &review{body: body, uid: rv.uid, pod: rv.pod}
	}
}

// remoteProfiles are the profiles of a charter process being fetched over
// one round.
type remoteProfiles struct{ wg sync.WaitGroup }

// profileRound fetches, over the coming round, a CPU profile of the
// process from its /debug/pprof/ into d.profileDir (cpu-<name>.pprof)
// and, with trace and -stall-trace, its execution trace
// (trace-<name>.trace). What fails is said on stderr: profiles never
// fail the run.
func (c *charterProcess) profileRound(ctx context.Context, d directOptions, name string, trace bool) *remoteProfiles {
	seconds := max(1, int((d.duration / time.Duration(d.rounds)).Seconds()))
	p := &remoteProfiles{}
	fetch := func(what, file string) {
		path := filepath.Join(d.profileDir, file)
		if err := fetchTo(ctx, c.pprofURL+what+"?seconds="+strconv.Itoa(seconds), path); err != nil {
			fmt.Fprintf(os.Stderr, "charter's %s: %v\n", what, err)
			return
		}
		fmt.Fprintf(os.Stderr, "charter's %s over %ds: %s\n", what, seconds, path)
	}
	p.wg.Go(func() { fetch("profile", "cpu-"+name+".pprof") })
	if trace && d.stallTrace > 0 {
		p.wg.Go(func() { fetch("trace", "trace-"+name+".trace") })
	}
	return p
}

func (p *remoteProfiles) wait() {
	if p != nil {
		p.wg.Wait()
	}
}

// fetchTo writes what url answers to path.
func fetchTo(ctx context.Context, url, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
