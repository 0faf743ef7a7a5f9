// Command benchadmission measures charter's admission latency with the Pod
// Security policies of policies/pod-security (baseline + restricted)
// switched to Enforce, and prints the figures against the targets of
// issue 5 (it asserts nothing):
//
//   - direct: an open-loop generator posts AdmissionReviews (CREATE of
//     compliant and non-compliant Pods, each of its own name) to charter's
//     HTTPS server on /validate/fail over warm keep-alive loopback
//     connections at fixed rates (1,000/s, then 3,000/s), and in the same
//     run to a null webhook that allows everything without evaluating: the
//     floor of this machine and method. charter records metrics and writes
//     its Kubernetes Events to a local kube-apiserver with charter serve's
//     defaults, so event work shares the cores as it does in a cluster.
//     Targets (issue 20): no errors, p99 within 1.5x of the null webhook's
//     at 1,000/s and within 2x at 3,000/s. -profile-dir keeps a CPU profile
//     (goroutines labelled webhook=null|charter) and an allocation profile
//     of each rate's measured rounds.
//   - vpol: the same direct method, with two charter servers in alternating
//     rounds instead of null and charter: one serving the conformance
//     corpus's Pod Security ClusterPolicies (pod-security/, in Enforce),
//     one their ValidatingPolicy translations (pod-security-vpol/, in
//     Deny), on the same Pods. Target (issue 17): the ValidatingPolicies'
//     p99 within 10% of the ClusterPolicies'.
//   - apiserver: on the local control plane, 50 concurrent clients create
//     Pods with server-side dry-run (open loop at -api-rate, or closed loop
//     with -api-rate 0): before charter runs, then with `charter serve
//     --controllers=admission` registered, in alternating rounds of Pods
//     in a namespace its webhooks cover and in its own namespace, which
//     they exclude (no webhook called). Target: under 5 ms added at p99.
//
// Latency counts from when a request was due, not when it was sent, so a
// server that falls behind shows its queue.
//
// -mode all (the default) runs direct, vpol and apiserver; both runs
// direct and apiserver.
//
//	go run ./hack/benchadmission -mode vpol -rate 1000,3000 -duration 20s -profile-dir /tmp/prof
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/charter-dev/charter/internal/controlplane"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-admission:", err)
		os.Exit(1)
	}
}

func run() error {
	// envtest logs through controller-runtime; the figures are the output.
	ctrllog.SetLogger(logr.Discard())
	root, err := controlplane.ModuleRoot()
	if err != nil {
		return err
	}
	// A flag set of its own: the global one carries flags that imported
	// packages register (controller-runtime's -kubeconfig), which mean
	// nothing here.
	fs := flag.NewFlagSet("bench-admission", flag.ExitOnError)
	var (
		mode   = fs.String("mode", "all", "direct, vpol, apiserver, both (direct and apiserver), all (those three); policies (cost by installed policies), dev or split (charter as run, with a null webhook) are not part of all")
		corpus = fs.String("corpus", filepath.Join(root, "..", "shared", "conformance", "kyverno-policies"), "vpol: the conformance corpus's policy folder, with pod-security/ and pod-security-vpol/")
		d      = directOptions{}
		a      = apiOptions{}
		po     = policiesOptions{counts: []int{20, 200, 1000}}
	)
	fs.StringVar(&d.policyDir, "policies", filepath.Join(root, "policies", "pod-security"), "folder of the policies to enforce (<name>/<name>.yaml)")
	d.rates = envRates("BENCH_RATE", []float64{1000, 3000})
	fs.Var((*rateList)(&d.rates), "rate", "direct: arrival rates, AdmissionReviews per second, comma-separated, each measured in turn ($BENCH_RATE)")
	fs.DurationVar(&d.duration, "duration", envDuration("BENCH_DURATION", 20*time.Second), "direct: measured time per webhook, split over the rounds ($BENCH_DURATION)")
	fs.DurationVar(&d.warmup, "warmup", 3*time.Second, "direct: warm-up per webhook before measuring")
	fs.IntVar(&d.rounds, "rounds", 4, "direct: alternating rounds of null and charter, so drift on a shared machine hits both")
	fs.IntVar(&d.workers, "workers", 64, "direct: most requests in flight (and keep-alive connections) per webhook")
	fs.BoolVar(&d.metrics, "metrics", true, "direct: charter records Prometheus metrics, as charter serve does")
	fs.IntVar(&d.gcPercent, "gogc", serveGCPercent, "direct: GOGC of this process, which runs both servers (default: charter serve's)")
	fs.StringVar(&d.profileDir, "profile-dir", "", "direct and vpol: write a CPU profile (cpu-<rate>.pprof, cpu-vpol-<rate>.pprof) and an allocation profile (allocs-…) of each rate's measured rounds here")
	fs.DurationVar(&d.stallTrace, "stall-trace", 0, "direct and vpol: with -profile-dir, keep a flight recorder of the Go execution trace over the measured rounds and write the last seconds of it when a request takes longer than this (stall-<rate>-<webhook>-<n>.trace, up to 3 per webhook and rate); 0: none")
	fs.BoolVar(&d.events, "events", true, "direct: charter writes Kubernetes Events to a local kube-apiserver, as charter serve does by default")
	fs.BoolVar(&d.uniqueNames, "unique-names", true, "direct: each request names a Pod of its own, as a stream of Pod creations does (false: a few names repeat, and their events aggregate)")
	fs.Float64Var(&d.noncompliant, "noncompliant", 0.5, "share of requests carrying a non-compliant Pod (0 to 1)")
	fs.Float64Var(&a.rate, "api-rate", envFloat("BENCH_API_RATE", 100), "apiserver: Pod creations (dry-run) per second, open loop; 0 for a closed loop ($BENCH_API_RATE)")
	fs.IntVar(&a.clients, "api-clients", 50, "apiserver: concurrent clients")
	fs.DurationVar(&a.duration, "api-duration", envDuration("BENCH_API_DURATION", 16*time.Second), "apiserver: measured time with and without charter, split over the rounds ($BENCH_API_DURATION)")
	fs.IntVar(&a.rounds, "api-rounds", 4, "apiserver: alternating rounds with and without charter's webhooks")
	fs.DurationVar(&a.warmup, "api-warmup", 3*time.Second, "apiserver: warm-up before each measurement")
	fs.StringVar(&a.charter, "charter", filepath.Join(root, "bin", "charter"), "apiserver: the charter binary (make build)")
	fs.BoolVar(&a.keepLogs, "keep-logs", false, "apiserver: keep the control plane's and charter's logs")
	fs.Var((*intList)(&po.counts), "policy-counts", "policies: installed policies at each point of the curve, comma-separated (at least the 17 enforced ones)")
	fs.StringVar(&po.libraryDir, "library", filepath.Join(root, "policies"), "policies: charter's policy library, whose ClusterPolicies are copied to make up the counts")
	fs.StringVar(&po.pointFile, "point-file", "", "policies: also write the curve's points here as JSON (make bench-scale reads them)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	a.policyDir, a.noncompliant = d.policyDir, d.noncompliant
	if err := d.validate(); err != nil {
		return err
	}
	if err := a.validate(); err != nil {
		return err
	}

	debug.SetGCPercent(d.gcPercent)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first Ctrl-C stops the run and cleans up; a second one, while
	// that takes its time, kills the process as usual.
	go func() { <-ctx.Done(); stop() }()
	p := newPrinter(os.Stdout)
	err = runModes(ctx, *mode, d, a, po, *corpus, p)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("interrupted (everything it started is stopped): %w", err)
	}
	return err
}

func runModes(ctx context.Context, mode string, d directOptions, a apiOptions, po policiesOptions, corpus string, p *printer) error {
	runs := map[string]func() error{
		"direct":    func() error { return runDirect(ctx, d, p) },
		"vpol":      func() error { return runVPol(ctx, d, corpus, p) },
		"apiserver": func() error { return runAPIServer(ctx, a, p) },
		"policies":  func() error { return runPolicies(ctx, d, po, p) },
		"dev":       func() error { return runStack(ctx, "dev", d, a, p) },
		"split":     func() error { return runStack(ctx, "split", d, a, p) },
	}
	var names []string
	switch mode {
	case "direct", "vpol", "apiserver", "policies", "dev", "split":
		names = []string{mode}
	case "both":
		names = []string{"direct", "apiserver"}
	case "all":
		names = []string{"direct", "vpol", "apiserver"}
	default:
		return fmt.Errorf("-mode %q: want direct, vpol, apiserver, both, all, policies, dev or split", mode)
	}
	for _, name := range names {
		if err := runs[name](); err != nil {
			if len(names) == 1 {
				return err
			}
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func (o directOptions) validate() error {
	var errs []error
	if len(o.rates) == 0 {
		errs = append(errs, errors.New("-rate: name at least one rate"))
	}
	for _, rate := range o.rates {
		if rate <= 0 {
			errs = append(errs, fmt.Errorf("-rate %v: want more than 0", rate))
		}
	}
	if o.rounds < 1 {
		errs = append(errs, fmt.Errorf("-rounds %d: want at least 1", o.rounds))
	} else if slices.ContainsFunc(o.rates, func(rate float64) bool {
		return rate > 0 && (o.duration/time.Duration(o.rounds) <= 0 || rate*(o.duration/time.Duration(o.rounds)).Seconds() < 1)
	}) {
		errs = append(errs, fmt.Errorf("-duration %s over %d rounds at %v/s: no request per round", o.duration, o.rounds, o.rates))
	}
	if o.workers < 1 {
		errs = append(errs, fmt.Errorf("-workers %d: want at least 1", o.workers))
	}
	if o.stallTrace > 0 && o.profileDir == "" {
		errs = append(errs, fmt.Errorf("-stall-trace %s: name the folder for the traces with -profile-dir", o.stallTrace))
	}
	if o.warmup < 0 {
		errs = append(errs, fmt.Errorf("-warmup %s: want 0 or more", o.warmup))
	}
	if o.noncompliant < 0 || o.noncompliant > 1 {
		errs = append(errs, fmt.Errorf("-noncompliant %v: want a fraction from 0 to 1", o.noncompliant))
	}
	return errors.Join(errs...)
}

func envFloat(name string, def float64) float64 {
	if v := os.Getenv(name); v != "" {
		var f float64
		if _, err := fmt.Sscan(v, &f); err == nil {
			return f
		}
		fmt.Fprintf(os.Stderr, "bench-admission: ignoring $%s=%q: not a number\n", name, v)
	}
	return def
}

// rateList is a comma-separated list of rates, e.g. 1000,3000.
type rateList []float64

func (l *rateList) String() string {
	parts := make([]string, len(*l))
	for i, r := range *l {
		parts[i] = strconv.FormatFloat(r, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

func (l *rateList) Set(v string) error {
	rates, err := parseRates(v)
	if err != nil {
		return err
	}
	*l = rates
	return nil
}

func parseRates(v string) ([]float64, error) {
	var rates []float64
	for part := range strings.SplitSeq(v, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a rate", part)
		}
		rates = append(rates, r)
	}
	return rates, nil
}

func envRates(name string, def []float64) []float64 {
	if v := os.Getenv(name); v != "" {
		rates, err := parseRates(v)
		if err == nil {
			return rates
		}
		fmt.Fprintf(os.Stderr, "bench-admission: ignoring $%s=%q: %v\n", name, v, err)
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err == nil {
			return d
		}
		fmt.Fprintf(os.Stderr, "bench-admission: ignoring $%s=%q: %v\n", name, v, err)
	}
	return def
}
