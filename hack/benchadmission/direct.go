package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/hack/benchadmission/loadgen"
	"github.com/charter-dev/charter/hack/benchadmission/policymix"
	"github.com/charter-dev/charter/hack/benchadmission/workload"
	"github.com/charter-dev/charter/internal/benchmem"
	"github.com/charter-dev/charter/webhook/certs"
	"github.com/charter-dev/charter/webhook/metrics"
	"github.com/charter-dev/charter/webhook/server"
)

// directOptions configure the direct mode.
type directOptions struct {
	policyDir    string
	rates        []float64     // measured in turn, each with null and charter
	rate         float64       // the one being measured
	duration     time.Duration // per webhook and rate, over every round
	warmup       time.Duration // per webhook and rate, before the first round
	rounds       int
	workers      int
	noncompliant float64
	profileDir   string        // CPU and allocation profiles per rate, when set
	profileTag   string        // names this mode's profiles: <kind>-<tag><rate>.pprof
	metrics      bool          // record Prometheus metrics, as charter serve does
	events       bool          // write Kubernetes Events to a local API server, as charter serve does
	uniqueNames  bool          // every request names a Pod of its own, as real creations do
	gcPercent    int           // GOGC of this process, which runs both servers
	stallTrace   time.Duration // write the execution trace around a request slower than this (0: none)
}

// review is a prepared request body and what must come back.
type review struct {
	body []byte
	uid  string
	pod  workload.Pod
}

// webhookTarget is one admission server under load and its figures.
type webhookTarget struct {
	name   string
	url    string
	client *http.Client
	null   bool // allows everything, so every decision expected is "allowed"
	// unchecked: the decisions are counted (denied), not checked
	// against the Pod's own (the stack modes run a whole environment,
	// whose audited policies admit some non-compliant Pods).
	unchecked bool
	denied    atomic.Int64
	reviews   func(i int) *review
	results   loadgen.Results
	gc        gcUsage       // over its measured rounds
	cpu       time.Duration // this process's CPU time during its measured rounds
}

// rateResult is what one rate measured.
type rateResult struct {
	rate              float64
	null, charter     loadgen.Summary
	charterErrors     int
	charterRate       float64
	eventCreates      uint64 // during charter's rounds
	eventSeries       uint64
	eventsDropped     uint64  // batches dropped on a full queue, and events after failed creates
	eventsFiltered    uint64  // held back by the spam filter (per object, as client-go's recorder)
	charterSeconds    float64 // measured time of charter's rounds
	nullGC, charterGC gcUsage
	requests          [2]int           // null, charter
	cpu               [2]time.Duration // this process's CPU time during the rounds of null, charter
}

// p99Target is issue 20's target for the p99 ratio at a rate: 1.5x the
// null webhook's up to 1,000/s, 2x above.
func p99Target(rate float64) float64 {
	if rate <= 1000 {
		return 1.5
	}
	return 2
}

// runDirect measures charter's admission server and a null one, both in
// this process, over HTTPS on loopback, in alternating rounds at each rate,
// and prints the figures. With events on, charter writes its Kubernetes
// Events to a local control plane as charter serve does.
func runDirect(ctx context.Context, o directOptions, p *printer) error {
	policies, err := policymix.EnforcedPolicies(o.policyDir)
	if err != nil {
		return err
	}
	snapshot, err := workload.SnapshotOf(policies)
	if err != nil {
		return err
	}
	w, err := newWorkload(o)
	if err != nil {
		return err
	}
	sink, writes, stopEvents, err := eventSinkFor(ctx, o)
	if err != nil {
		return err
	}
	defer stopEvents()
	charterHandler, err := newCharterHandler("charter", snapshot, o.metrics, sink)
	if err != nil {
		return err
	}
	lo, err := startLoopback()
	if err != nil {
		return err
	}
	defer lo.close()
	targets, err := lo.targets(ctx, o, w, []servedHandler{
		{"null", labelled("null", server.NewHandler(server.Options{Null: true})), true},
		{"charter", charterHandler, false},
	})
	if err != nil {
		return err
	}

	var results []rateResult
	offset := 0
	for _, rate := range o.rates {
		o.rate = rate
		for _, t := range targets {
			t.results, t.gc = loadgen.Results{}, gcUsage{}
		}
		r, err := measureRate(ctx, o, targets, writes, &offset)
		if err != nil {
			return err
		}
		results = append(results, r)
		printRate(p, o, len(policies), len(w.pods), targets, r)
	}
	printRatios(p, results)
	return nil
}

// measureRate runs the warm-up and the alternating rounds of one rate,
// with CPU and allocation profiles when asked.
func measureRate(ctx context.Context, o directOptions, targets []*webhookTarget, writes *countingWriter, offset *int) (rateResult, error) {
	r := rateResult{rate: o.rate}
	var writesBefore eventCounts
	err := measureRounds(ctx, o, targets, offset, func(t *webhookTarget, started time.Time, done bool) {
		if t.null {
			return
		}
		if !done {
			writesBefore = writes.counts()
			return
		}
		after := writes.counts()
		r.eventCreates += after.creates - writesBefore.creates
		r.eventSeries += after.series - writesBefore.series
		r.eventsDropped += after.queueDropped - writesBefore.queueDropped + after.dropped - writesBefore.dropped
		r.eventsFiltered += after.spamFiltered - writesBefore.spamFiltered
		r.charterSeconds += time.Since(started).Seconds()
	})
	if err != nil {
		return r, err
	}
	r.null, r.charter = loadgen.Summarize(targets[0].results.Latencies), loadgen.Summarize(targets[1].results.Latencies)
	r.charterErrors, r.charterRate = len(targets[1].results.Errors), targets[1].results.Rate()
	r.nullGC, r.charterGC = targets[0].gc, targets[1].gc
	r.requests = [2]int{targets[0].results.Requests(), targets[1].results.Requests()}
	r.cpu = [2]time.Duration{targets[0].cpu, targets[1].cpu}
	return r, nil
}

// measureRounds runs the warm-up of each target at o.rate, then o.rounds
// rounds in which every target gets its share of o.duration in turn, the
// order reversed every other round so that drift on a shared machine hits
// them all; each target's latencies, errors, garbage collection and CPU
// time are added up in it. around, when set, is called just before
// (done false) and after (done true) each round of each target. With
// o.profileDir set the measured rounds are profiled.
func measureRounds(ctx context.Context, o directOptions, targets []*webhookTarget, offset *int, around func(t *webhookTarget, started time.Time, done bool)) error {
	for _, t := range targets {
		t.results, t.gc, t.cpu = loadgen.Results{}, gcUsage{}, 0
	}
	fmt.Fprintf(os.Stderr, "%g/s: warming up %s per webhook\n", o.rate, o.warmup)
	for _, t := range targets {
		if o.warmup > 0 {
			cfg := loadgen.Config{Rate: o.rate, Duration: o.warmup, Workers: o.workers, Offset: *offset}
			if _, err := loadgen.Run(ctx, cfg, t.do); err != nil {
				return err
			}
			*offset += cfg.Requests()
		}
	}
	rateName := o.profileTag + strconv.FormatFloat(o.rate, 'g', -1, 64)
	stopProfile, err := startProfiles(o.profileDir, rateName)
	if err != nil {
		return err
	}
	var tl *timeline
	if o.profileDir != "" {
		tl = newTimeline()
	}
	stalls := newStallTracer(o.profileDir, o.stallTrace)
	if err := stalls.start(rateName); err != nil {
		_ = stopProfile()
		return err
	}
	defer stalls.stop()
	perRound := o.duration / time.Duration(o.rounds)
	for round := range o.rounds {
		order := slices.Clone(targets)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, t := range order {
			fmt.Fprintf(os.Stderr, "%g/s: round %d/%d, %s webhook, %s\n", o.rate, round+1, o.rounds, t.name, perRound)
			// Neither server pays for the other's garbage.
			runtime.GC()
			cfg := loadgen.Config{Rate: o.rate, Duration: perRound, Workers: o.workers, Offset: *offset, Answered: tl.answered(t.name, stalls.answered(t.name))}
			*offset += cfg.Requests()
			gcBefore, cpuBefore, started := sampleGC(), benchmem.ProcessCPU(), time.Now()
			if around != nil {
				around(t, started, false)
			}
			res, err := loadgen.Run(ctx, cfg, t.do)
			if err != nil {
				_ = stopProfile()
				return err
			}
			t.gc = t.gc.add(sampleGC().since(gcBefore))
			t.cpu += benchmem.ProcessCPU() - cpuBefore
			t.results.Merge(res)
			if around != nil {
				around(t, started, true)
			}
		}
	}
	if tl != nil {
		if err := tl.report(filepath.Join(o.profileDir, "latency-"+rateName+".csv"), targets); err != nil {
			_ = stopProfile()
			return err
		}
	}
	return stopProfile()
}

// startProfiles starts a CPU profile of one rate's measured rounds in
// dir/cpu-<name>.pprof; what it returns stops it and writes the
// allocations made meanwhile to dir/allocs-<name>.pprof.
func startProfiles(dir, name string) (stop func() error, err error) {
	if dir == "" {
		return func() error { return nil }, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	cpuPath := filepath.Join(dir, "cpu-"+name+".pprof")
	f, err := os.Create(cpuPath)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	// The allocation profile counts from the process's start: the one
	// taken now is the base the final one is read against.
	basePath := filepath.Join(dir, "allocs-"+name+"-base.pprof")
	if err := writeAllocs(basePath); err != nil {
		pprof.StopCPUProfile()
		f.Close()
		return nil, err
	}
	stopped := false
	return func() error {
		if stopped {
			return nil
		}
		stopped = true
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return err
		}
		allocsPath := filepath.Join(dir, "allocs-"+name+".pprof")
		if err := writeAllocs(allocsPath); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%s: profiles of the measured rounds: go tool pprof -tagfocus=webhook=<name> %s; go tool pprof -sample_index=alloc_space -diff_base %s %s\n",
			name, cpuPath, basePath, allocsPath)
		return nil
	}, nil
}

func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("allocation profile: %w", err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("allocation profile: %w", err)
	}
	return f.Close()
}

// labelled tags the goroutines serving h with webhook=name, so a CPU
// profile of both servers and the load generator can be narrowed to one
// (go tool pprof -tagfocus=webhook=charter).
func labelled(name string, h http.Handler) http.Handler {
	labels := pprof.Labels("webhook", name)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pprof.Do(r.Context(), labels, func(ctx context.Context) { h.ServeHTTP(w, r.WithContext(ctx)) })
	})
}

// uniquelyNamed returns rv for request i with a Pod name of its own, as
// the API server's requests for Pods created one after another carry:
// events about distinct Pods are distinct events, never one series.
func uniquelyNamed(rv *review, i int) *review {
	name := rv.pod.Pod.Name
	unique := name + "-" + strconv.Itoa(i)
	body := bytes.ReplaceAll(rv.body, []byte(`"name":"`+name+`"`), []byte(`"name":"`+unique+`"`))
	return &review{body: body, uid: rv.uid, pod: rv.pod}
}

func printRate(p *printer, o directOptions, policies, shapes int, targets []*webhookTarget, r rateResult) {
	p.printf("\n%s\n", p.style(fmt.Sprintf("Admission webhook, direct (POST /validate/fail over loopback HTTPS) at %g/s", r.rate), bold))
	p.printf("%d Pod Security policies (baseline + restricted) in Enforce; %.0f%% non-compliant Pods of %d shapes%s\n",
		policies, o.noncompliant*100, shapes, map[bool]string{true: ", each request a Pod of its own name", false: ""}[o.uniqueNames])
	withMetrics := "with Prometheus metrics as charter serve records them"
	if !o.metrics {
		withMetrics = "without metrics"
	}
	withEvents := "Kubernetes Events written to a local kube-apiserver with charter serve's defaults"
	if !o.events {
		withEvents = "no Kubernetes Events"
	}
	p.printf("open loop, %s per webhook in %d alternating rounds after %s of warm-up; HTTP/1.1 keep-alive (the server speaks nothing else), up to %d in flight; charter %s, %s; %d CPUs\n\n",
		o.duration, o.rounds, o.warmup, o.workers, withMetrics, withEvents, runtime.NumCPU())
	rows := make([][]string, 0, len(targets))
	for i, t := range targets {
		s := r.null
		if !t.null {
			s = r.charter
		}
		rows = append(rows, []string{t.name, fmt.Sprint(r.requests[i]), fmt.Sprintf("%.1f", t.results.Rate()),
			ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max), fmt.Sprint(len(t.results.Errors))})
	}
	p.table([]string{"WEBHOOK", "REQUESTS", "RATE/S", "P50", "P95", "P99", "MAX", "ERRORS"}, rows)
	for _, t := range targets {
		if len(t.results.Errors) > 0 {
			p.printf("  %s errors: %s\n", t.name, errorBreakdown(t.results.Errors))
		}
	}
	p.printf("garbage collection (GOGC=%d; servers and load generator share this process): null %s; charter %s\n",
		o.gcPercent, r.nullGC, r.charterGC)
	p.printf("allocated per review (server and load generator): null %s; charter %s\n",
		r.nullGC.perRequest(r.requests[0]), r.charterGC.perRequest(r.requests[1]))
	p.printf("CPU of this process per review (server and load generator): null %s; charter %s\n",
		perReview(r.cpu[0], r.requests[0]), perReview(r.cpu[1], r.requests[1]))
	if o.events && r.charterSeconds > 0 {
		p.printf("events written during charter's rounds: %d creates (%.0f/s), %d series updates, %d held back per object as client-go's recorder does, %d dropped (queue full or create failed), for %d reviews\n",
			r.eventCreates, float64(r.eventCreates)/r.charterSeconds, r.eventSeries, r.eventsFiltered, r.eventsDropped, r.requests[1])
	}
	ratio := float64(r.charter.P99) / float64(max(r.null.P99, 1))
	target := p99Target(r.rate)
	p.verdict("p99 charter / p99 null", fmt.Sprintf("%.2fx", ratio), fmt.Sprintf("target ≤ %gx", target), ratio <= target)
	p.verdict("charter errors", fmt.Sprint(r.charterErrors), "target 0", r.charterErrors == 0)
	if r.charterRate < 0.95*r.rate {
		p.printf("charter answered %.0f/s of the %g/s offered: the server (or this machine) fell behind\n", r.charterRate, r.rate)
	}
}

func perReview(d time.Duration, requests int) string {
	if requests == 0 {
		return "no reviews"
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(requests)/float64(time.Millisecond))
}

// printRatios sums up every rate: the p99 ratio against its target.
func printRatios(p *printer, results []rateResult) {
	if len(results) < 2 {
		return
	}
	p.printf("\n%s\n", p.style("Direct, every rate (same run)", bold))
	rows := make([][]string, 0, len(results))
	for _, r := range results {
		ratio := float64(r.charter.P99) / float64(max(r.null.P99, 1))
		target := p99Target(r.rate)
		verdict := p.style("met", green)
		if ratio > target || r.charterErrors > 0 {
			verdict = p.style("MISSED", red)
		}
		rows = append(rows, []string{fmt.Sprintf("%g/s", r.rate), ms(r.null.P50) + " / " + ms(r.null.P99), ms(r.charter.P50) + " / " + ms(r.charter.P99),
			fmt.Sprintf("%.2fx", ratio), fmt.Sprintf("≤ %gx", target), verdict})
	}
	p.table([]string{"RATE", "NULL P50 / P99", "CHARTER P50 / P99", "P99 RATIO", "TARGET", ""}, rows)
}

// benchWorkload is the Pods the benchmark sends and how request i picks
// its review.
type benchWorkload struct {
	pods    []workload.Pod
	reviews map[string]*review // by Pod name
	at      func(i int) *review
}

func newWorkload(o directOptions) (*benchWorkload, error) {
	pods := workload.Pods("bench")
	mix, err := workload.NewMix(pods, o.noncompliant)
	if err != nil {
		return nil, err
	}
	w := &benchWorkload{pods: pods, reviews: map[string]*review{}}
	for _, pod := range pods {
		uid := "bench-" + pod.Pod.Name
		body, err := workload.Review(pod.Pod, uid)
		if err != nil {
			return nil, err
		}
		w.reviews[pod.Pod.Name] = &review{body: body, uid: uid, pod: pod}
	}
	w.at = func(i int) *review { return w.reviews[mix.At(i).Pod.Name] }
	if o.uniqueNames {
		w.at = func(i int) *review { return uniquelyNamed(w.reviews[mix.At(i).Pod.Name], i) }
	}
	return w, nil
}

// newCharterHandler is charter's admission handler serving snapshot as
// charter serve does (workload.ServeHandler), its goroutines labelled
// webhook=name.
func newCharterHandler(name string, snapshot *policycache.Snapshot, withMetrics bool, sink server.EventSink) (http.Handler, error) {
	var rec *metrics.Recorder
	if withMetrics {
		var err error
		if rec, err = metrics.New(prometheus.NewRegistry(), "bench"); err != nil {
			return nil, err
		}
	}
	return labelled(name, workload.ServeHandler(snapshot, rec, sink)), nil
}

// servedHandler is an admission handler to put under load.
type servedHandler struct {
	name string
	h    http.Handler
	null bool // allows everything
}

// loopback serves admission handlers over HTTPS on 127.0.0.1, each on a
// port of its own, with a throwaway certificate.
type loopback struct {
	caPEM   []byte
	cert    *tls.Certificate
	ctx     context.Context
	stop    context.CancelFunc
	servers sync.WaitGroup
}

func startLoopback() (*loopback, error) {
	caPEM, cert, err := servingCertificate()
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	return &loopback{caPEM: caPEM, cert: cert, ctx: ctx, stop: stop}, nil
}

// close stops every server and waits for them.
func (l *loopback) close() { l.stop(); l.servers.Wait() }

// serve starts a server for h and returns its /validate/fail URL.
func (l *loopback) serve(h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("admission server: %w", err)
	}
	srv := &server.Server{Handler: h, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return l.cert, nil },
		ShutdownTimeout: 5 * time.Second, Log: logr.Discard()}
	l.servers.Go(func() {
		if err := srv.Serve(l.ctx, ln); err != nil {
			fmt.Fprintln(os.Stderr, "bench-admission:", err)
		}
	})
	return "https://" + ln.Addr().String() + server.PathValidateFail + "?timeout=10s", nil
}

// targets serves each handler, sends it every Pod of w once (a wrong
// decision here is a setup fault, better named now than counted 10,000
// times) and opens its keep-alive connections.
func (l *loopback) targets(ctx context.Context, o directOptions, w *benchWorkload, handlers []servedHandler) ([]*webhookTarget, error) {
	var targets []*webhookTarget
	for _, h := range handlers {
		url, err := l.serve(h.h)
		if err != nil {
			return nil, err
		}
		targets = append(targets, &webhookTarget{name: h.name, url: url, null: h.null, reviews: w.at,
			client: httpClient(l.caPEM, o.workers)})
	}
	for _, t := range targets {
		for _, pod := range w.pods {
			if err := t.send(ctx, w.reviews[pod.Pod.Name]); err != nil {
				return nil, fmt.Errorf("%s webhook, Pod %s before the run: %w", t.name, pod.Pod.Name, err)
			}
		}
	}
	for _, t := range targets {
		if err := t.warm(ctx, min(o.workers, 16)); err != nil {
			return nil, err
		}
	}
	return targets, nil
}

// servingCertificate issues a throwaway CA and a serving certificate for
// 127.0.0.1 with charter's own PKI code.
func servingCertificate() (caPEM []byte, cert *tls.Certificate, err error) {
	now := time.Now()
	ca, err := certs.NewCA("charter", nil, now)
	if err != nil {
		return nil, nil, fmt.Errorf("benchmark CA: %w", err)
	}
	pair, err := certs.NewServing(ca, certs.Serving{Service: "charter-svc", Namespace: "charter", Hosts: []string{"127.0.0.1"}}, now)
	if err != nil {
		return nil, nil, fmt.Errorf("benchmark serving certificate: %w", err)
	}
	c, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("benchmark serving certificate: %w", err)
	}
	return ca.CertPEM, &c, nil
}

// httpClient keeps up to conns connections alive to one server, as the
// API server keeps its connections to a webhook.
func httpClient(caPEM []byte, conns int) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true,
	}}
}

// warm opens n keep-alive connections by sending n requests at once.
func (t *webhookTarget) warm(ctx context.Context, n int) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = t.do(ctx, i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s webhook, warming connections: %w", t.name, err)
	}
	return nil
}

// do sends request i of the mix.
func (t *webhookTarget) do(ctx context.Context, i int) error { return t.send(ctx, t.reviews(i)) }

// admissionAnswer is the part of the reply the benchmark checks.
type admissionAnswer struct {
	Response *struct {
		UID     string `json:"uid"`
		Allowed bool   `json:"allowed"`
		Status  *struct {
			Message string `json:"message"`
		} `json:"status"`
	} `json:"response"`
}

// send posts one review and checks the answer: HTTP 200, an
// AdmissionReview for the same uid, and the decision the Pod deserves.
func (t *webhookTarget) send(ctx context.Context, rv *review) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(rv.body))
	if err != nil {
		return failed(kindTransport, "%v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return failed(kindTransport, "%v", err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return failed(kindTransport, "reading the answer: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		return failed(kindHTTP, "HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var ans admissionAnswer
	if err := json.Unmarshal(body, &ans); err != nil || ans.Response == nil {
		return failed(kindHTTP, "not an AdmissionReview answer (%v): %s", err, oneLine(string(body), 200))
	}
	if ans.Response.UID != rv.uid {
		return failed(kindHTTP, "answer for uid %q to request %q", ans.Response.UID, rv.uid)
	}
	if t.unchecked {
		if !ans.Response.Allowed {
			t.denied.Add(1)
		}
		return nil
	}
	want := t.null || rv.pod.Compliant
	switch {
	case ans.Response.Allowed && !want:
		return failed(kindWrong, "non-compliant Pod %s (fails %s) allowed", rv.pod.Pod.Name, rv.pod.Violates)
	case !ans.Response.Allowed && want:
		msg := ""
		if ans.Response.Status != nil {
			msg = ans.Response.Status.Message
		}
		return failed(kindWrong, "compliant Pod %s denied: %s", rv.pod.Pod.Name, msg)
	}
	return nil
}
