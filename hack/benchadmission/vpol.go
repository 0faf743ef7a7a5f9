package main

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"

	"github.com/charter-dev/charter/hack/benchadmission/loadgen"
	"github.com/charter-dev/charter/hack/benchadmission/workload"
)

// vpolP99Target is issue 17's target: admission with the Pod Security set
// as ValidatingPolicies has a p99 within 10% of the same set as
// ClusterPolicies, in the same run.
const vpolP99Target = 1.10

// runVPol measures charter's admission server twice in this process, in
// alternating rounds at each rate: once with the corpus's Pod Security
// ClusterPolicies in Enforce (pod-security/), once with their
// ValidatingPolicy translations in Deny (pod-security-vpol/), on the same
// Pods, and prints the p99 of each against the target.
func runVPol(ctx context.Context, o directOptions, corpus string, p *printer) error {
	cpols, vpols, err := workload.PodSecurityPairs(filepath.Join(corpus, "pod-security"), filepath.Join(corpus, "pod-security-vpol"))
	if err != nil {
		return err
	}
	cpSnapshot, err := workload.Snapshot(cpols)
	if err != nil {
		return fmt.Errorf("ClusterPolicies: %w", err)
	}
	vpSnapshot, err := workload.Snapshot(vpols)
	if err != nil {
		return fmt.Errorf("ValidatingPolicies: %w", err)
	}
	w, err := newWorkload(o)
	if err != nil {
		return err
	}
	sink, _, stopEvents, err := eventSinkFor(ctx, o)
	if err != nil {
		return err
	}
	defer stopEvents()
	cpHandler, err := newCharterHandler("clusterpolicy", cpSnapshot, o.metrics, sink)
	if err != nil {
		return err
	}
	vpHandler, err := newCharterHandler("validatingpolicy", vpSnapshot, o.metrics, sink)
	if err != nil {
		return err
	}
	handlers := []servedHandler{{"clusterpolicy", cpHandler, false}, {"validatingpolicy", vpHandler, false}}
	lo, err := startLoopback()
	if err != nil {
		return err
	}
	defer lo.close()
	targets, err := lo.targets(ctx, o, w, handlers)
	if err != nil {
		return err
	}
	o.profileTag = "vpol-"
	offset := 0
	var ratios [][]string
	for _, rate := range o.rates {
		o.rate = rate
		if err := measureRounds(ctx, o, targets, &offset, nil); err != nil {
			return err
		}
		cp, vp := loadgen.Summarize(targets[0].results.Latencies), loadgen.Summarize(targets[1].results.Latencies)
		ratio := float64(vp.P99) / float64(max(cp.P99, 1))
		printVPolRate(p, o, len(vpols), len(w.pods), targets, []loadgen.Summary{cp, vp}, ratio)
		verdict := p.style("met", green)
		if ratio > vpolP99Target || len(targets[0].results.Errors)+len(targets[1].results.Errors) > 0 {
			verdict = p.style("MISSED", red)
		}
		ratios = append(ratios, []string{fmt.Sprintf("%g/s", rate), ms(cp.P50) + " / " + ms(cp.P99), ms(vp.P50) + " / " + ms(vp.P99),
			fmt.Sprintf("%.2fx", ratio), fmt.Sprintf("≤ %gx", vpolP99Target), verdict})
	}
	if len(ratios) > 1 {
		p.printf("\n%s\n", p.style("ValidatingPolicy vs ClusterPolicy, every rate (same run)", bold))
		p.table([]string{"RATE", "CLUSTERPOLICY P50 / P99", "VALIDATINGPOLICY P50 / P99", "P99 RATIO", "TARGET", ""}, ratios)
	}
	return nil
}

func printVPolRate(p *printer, o directOptions, pairs, shapes int, targets []*webhookTarget, sums []loadgen.Summary, ratio float64) {
	p.printf("\n%s\n", p.style(fmt.Sprintf("Admission webhook, Pod Security as ValidatingPolicies vs ClusterPolicies (POST /validate/fail over loopback HTTPS) at %g/s", o.rate), bold))
	p.printf("%d policies of the conformance corpus in both forms (pod-security-vpol/ in Deny, pod-security/ in Enforce); %.0f%% non-compliant Pods of %d shapes; open loop, %s per webhook in %d alternating rounds after %s of warm-up, up to %d in flight; %d CPUs\n\n",
		pairs, o.noncompliant*100, shapes, o.duration, o.rounds, o.warmup, o.workers, runtime.NumCPU())
	rows := make([][]string, 0, len(targets))
	for i, t := range targets {
		s := sums[i]
		rows = append(rows, []string{t.name, fmt.Sprint(t.results.Requests()), fmt.Sprintf("%.1f", t.results.Rate()),
			ms(s.P50), ms(s.P95), ms(s.P99), ms(s.Max), fmt.Sprint(len(t.results.Errors)),
			t.gc.perRequest(t.results.Requests()), perReview(t.cpu, t.results.Requests())})
	}
	p.table([]string{"POLICIES", "REQUESTS", "RATE/S", "P50", "P95", "P99", "MAX", "ERRORS", "ALLOCATED PER REVIEW", "CPU PER REVIEW"}, rows)
	for _, t := range targets {
		if len(t.results.Errors) > 0 {
			p.printf("  %s errors: %s\n", t.name, errorBreakdown(t.results.Errors))
		}
	}
	p.verdict("p99 ValidatingPolicy / p99 ClusterPolicy", fmt.Sprintf("%.2fx", ratio), fmt.Sprintf("target ≤ %gx", vpolP99Target), ratio <= vpolP99Target)
}
