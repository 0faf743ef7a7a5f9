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
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/charter-dev/charter/hack/benchadmission/loadgen"
	"github.com/charter-dev/charter/hack/benchadmission/workload"
	"github.com/charter-dev/charter/webhook/certs"
	"github.com/charter-dev/charter/webhook/metrics"
	"github.com/charter-dev/charter/webhook/server"
)

// directOptions configure the direct mode.
type directOptions struct {
	policyDir    string
	rate         float64
	duration     time.Duration // per webhook, over every round
	warmup       time.Duration // per webhook, before the first round
	rounds       int
	workers      int
	noncompliant float64
	cpuProfile   string
	metrics      bool // record Prometheus metrics, as charter serve does
	gcPercent    int  // GOGC of this process, which runs both servers
}

// review is a prepared request body and what must come back.
type review struct {
	body []byte
	uid  string
	pod  workload.Pod
}

// webhookTarget is one admission server under load and its figures.
type webhookTarget struct {
	name    string
	url     string
	client  *http.Client
	null    bool // allows everything, so every decision expected is "allowed"
	reviews func(i int) *review
	results loadgen.Results
	gc      gcUsage // over its measured rounds
}

// runDirect measures charter's admission server and a null one, both in
// this process, over HTTPS on loopback, in alternating rounds, and prints
// the figures.
func runDirect(ctx context.Context, o directOptions, p *printer) error {
	policies, err := workload.EnforcedPolicies(o.policyDir)
	if err != nil {
		return err
	}
	typed, err := workload.Typed(policies)
	if err != nil {
		return err
	}
	snapshot, err := workload.Snapshot(typed)
	if err != nil {
		return err
	}
	pods := workload.Pods("bench")
	mix, err := workload.NewMix(pods, o.noncompliant)
	if err != nil {
		return err
	}
	reviews := map[string]*review{}
	for _, pod := range pods {
		uid := "bench-" + pod.Pod.Name
		body, err := workload.Review(pod.Pod, uid)
		if err != nil {
			return err
		}
		reviews[pod.Pod.Name] = &review{body: body, uid: uid, pod: pod}
	}
	reviewAt := func(i int) *review { return reviews[mix.At(i).Pod.Name] }

	caPEM, cert, err := servingCertificate()
	if err != nil {
		return err
	}
	var rec *metrics.Recorder
	if o.metrics {
		if rec, err = metrics.New(prometheus.NewRegistry(), "bench"); err != nil {
			return err
		}
	}
	// The reports controller drains the audit queue in charter; here the
	// records are dropped as they come, so the queue never fills.
	audit := server.NewAuditQueue(1024, nil)
	go func() {
		for range audit.Records() {
		}
	}()
	charterHandler := server.NewHandler(server.Options{
		Policies: workload.Fixed{S: snapshot},
		Filters:  server.DefaultResourceFilters("charter"),
		Metrics:  rec,
		Audit:    audit,
	})
	nullHandler := server.NewHandler(server.Options{Null: true})

	srvCtx, stopServers := context.WithCancel(context.Background())
	var servers sync.WaitGroup
	defer func() { stopServers(); servers.Wait() }()
	serve := func(h http.Handler) (string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("admission server: %w", err)
		}
		srv := &server.Server{Handler: h, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert, nil },
			ShutdownTimeout: 5 * time.Second, Log: logr.Discard()}
		servers.Go(func() {
			if err := srv.Serve(srvCtx, ln); err != nil {
				fmt.Fprintln(os.Stderr, "bench-admission:", err)
			}
		})
		return "https://" + ln.Addr().String() + server.PathValidateFail + "?timeout=10s", nil
	}
	var targets []*webhookTarget
	for _, t := range []struct {
		name string
		h    http.Handler
		null bool
	}{{"null", nullHandler, true}, {"charter", charterHandler, false}} {
		url, err := serve(t.h)
		if err != nil {
			return err
		}
		targets = append(targets, &webhookTarget{name: t.name, url: url, null: t.null, reviews: reviewAt,
			client: httpClient(caPEM, o.workers)})
	}

	// Every Pod once on each server: a wrong decision here is a setup
	// fault, better named now than counted 10,000 times.
	for _, t := range targets {
		for _, pod := range pods {
			if err := t.send(ctx, reviews[pod.Pod.Name]); err != nil {
				return fmt.Errorf("%s webhook, Pod %s before the run: %w", t.name, pod.Pod.Name, err)
			}
		}
	}

	fmt.Fprintf(os.Stderr, "direct: warming up %d connections and %s per webhook\n", min(o.workers, 16), o.warmup)
	for _, t := range targets {
		if err := t.warm(ctx, min(o.workers, 16)); err != nil {
			return err
		}
		if o.warmup > 0 {
			if _, err := loadgen.Run(ctx, loadgen.Config{Rate: o.rate, Duration: o.warmup, Workers: o.workers}, t.do); err != nil {
				return err
			}
		}
	}

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	perRound := o.duration / time.Duration(o.rounds)
	for r := range o.rounds {
		order := targets
		if r%2 == 1 {
			order = []*webhookTarget{targets[1], targets[0]}
		}
		for _, t := range order {
			fmt.Fprintf(os.Stderr, "direct: round %d/%d, %s webhook, %s at %g/s\n", r+1, o.rounds, t.name, perRound, o.rate)
			// Neither server pays for the other's garbage.
			runtime.GC()
			cfg := loadgen.Config{Rate: o.rate, Duration: perRound, Workers: o.workers}
			cfg.Offset = r * cfg.Requests()
			gcBefore := sampleGC()
			res, err := loadgen.Run(ctx, cfg, t.do)
			if err != nil {
				return err
			}
			t.gc = t.gc.add(sampleGC().since(gcBefore))
			t.results.Merge(res)
		}
	}
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
		fmt.Fprintf(os.Stderr, "direct: CPU profile of the measured rounds (both webhooks and the load generator) in %s\n", o.cpuProfile)
	}

	p.printf("\n%s\n", p.style("Admission webhook, direct (POST /validate/fail over loopback HTTPS)", bold))
	p.printf("%d Pod Security policies (baseline + restricted) in Enforce; %.0f%% non-compliant Pods of %d shapes\n",
		len(policies), o.noncompliant*100, len(pods))
	withMetrics := "with Prometheus metrics as charter serve records them"
	if !o.metrics {
		withMetrics = "without metrics"
	}
	p.printf("open loop at %g/s, %s per webhook in %d alternating rounds after %s of warm-up; HTTP/1.1 keep-alive (the server speaks nothing else), up to %d in flight; charter %s; %d CPUs\n\n",
		o.rate, o.duration, o.rounds, o.warmup, o.workers, withMetrics, runtime.NumCPU())
	rows := make([][]string, 0, len(targets))
	sums := map[string]loadgen.Summary{}
	for _, t := range targets {
		s := loadgen.Summarize(t.results.Latencies)
		sums[t.name] = s
		rows = append(rows, []string{t.name, fmt.Sprint(t.results.Requests()), fmt.Sprintf("%.1f", t.results.Rate()),
			ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max), fmt.Sprint(len(t.results.Errors))})
	}
	p.table([]string{"WEBHOOK", "REQUESTS", "RATE/S", "P50", "P95", "P99", "MAX", "ERRORS"}, rows)
	for _, t := range targets {
		if len(t.results.Errors) > 0 {
			p.printf("  %s errors: %s\n", t.name, errorBreakdown(t.results.Errors))
		}
	}
	p.printf("garbage collection (GOGC=%d; servers and load generator share this process): null %s; charter %s\n\n",
		o.gcPercent, targets[0].gc, targets[1].gc)
	charter, null := sums["charter"], sums["null"]
	ratio := float64(charter.P99) / float64(max(null.P99, 1))
	p.verdict("p99 charter / p99 null", fmt.Sprintf("%.2fx", ratio), "target ≤ 1.5x", ratio <= 1.5)
	errs := len(targets[1].results.Errors)
	p.verdict("charter errors", fmt.Sprint(errs), "target 0", errs == 0)
	if achieved := targets[1].results.Rate(); achieved < 0.95*o.rate {
		p.printf("charter answered %.0f/s of the %g/s offered: the server (or this machine) fell behind\n", achieved, o.rate)
	}
	return nil
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
