package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/charter-dev/charter/hack/benchadmission/loadgen"
	"github.com/charter-dev/charter/hack/benchadmission/policymix"
	"github.com/charter-dev/charter/hack/benchadmission/workload"
	"github.com/charter-dev/charter/hack/benchscale/figures"
	"github.com/charter-dev/charter/webhook/server"
)

// policiesOptions configure the policies mode: how admission cost grows
// with the number of installed policies (issue 33, item 1).
type policiesOptions struct {
	counts     []int  // installed policies at each point
	libraryDir string // charter's policy library, copied to make up the counts
	pointFile  string // where the points go for make bench-scale (empty: nowhere)
}

// policiesGrowthGoal is issue 33's goal: p99 at the largest count within
// 2x the p99 at the smallest.
const policiesGrowthGoal = 2.0

// policiesPoint is one count's figures.
type policiesPoint struct {
	count          int
	null, charter  loadgen.Summary
	cpu            [2]time.Duration // per review: null, charter (server and load generator)
	errors         int
	rate, answered float64
}

// runPolicies measures, at the first -rate, charter serving the Pod
// Security set in Enforce plus generated policies up to each count
// (policymix.ScaledPolicies: copies of the library's policies, most not
// matching the Pods), against the null webhook in the same rounds, and
// prints how p99 and CPU per review grow from the smallest count to the
// largest.
func runPolicies(ctx context.Context, o directOptions, po policiesOptions, p *printer) error {
	if len(o.rates) > 1 {
		fmt.Fprintf(os.Stderr, "policies mode measures at the first rate only: %g/s\n", o.rates[0])
	}
	o.rate = o.rates[0]
	enforced, err := policymix.EnforcedPolicies(o.policyDir)
	if err != nil {
		return err
	}
	library, err := policymix.LibraryPolicies(po.libraryDir)
	if err != nil {
		return err
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
	lo, err := startLoopback()
	if err != nil {
		return err
	}
	defer lo.close()

	var points []policiesPoint
	offset := 0
	for _, count := range po.counts {
		policies, err := policymix.ScaledPolicies(enforced, library, count)
		if err != nil {
			return err
		}
		snapshot, err := workload.SnapshotOf(policies)
		if err != nil {
			return fmt.Errorf("%d policies: %w", count, err)
		}
		h, err := newCharterHandler("charter", snapshot, o.metrics, sink)
		if err != nil {
			return err
		}
		targets, err := lo.targets(ctx, o, w, []servedHandler{
			{"null", labelled("null", server.NewHandler(server.Options{Null: true})), true},
			{"charter", h, false},
		})
		if err != nil {
			return fmt.Errorf("%d policies: %w", count, err)
		}
		o.profileTag = "policies" + strconv.Itoa(count) + "-"
		if err := measureRounds(ctx, o, targets, &offset, nil); err != nil {
			return err
		}
		null, charter := targets[0], targets[1]
		pt := policiesPoint{
			count: count, null: loadgen.Summarize(null.results.Latencies), charter: loadgen.Summarize(charter.results.Latencies),
			cpu:    [2]time.Duration{perRequest(null.cpu, null.results.Requests()), perRequest(charter.cpu, charter.results.Requests())},
			errors: len(charter.results.Errors), rate: o.rate, answered: charter.results.Rate(),
		}
		points = append(points, pt)
		p.printf("%d policies: charter p99 %s (null %s), CPU per review %s (null %s), %d errors\n",
			count, ms(pt.charter.P99), ms(pt.null.P99), msPer(pt.cpu[1]), msPer(pt.cpu[0]), pt.errors)
		if pt.errors > 0 {
			p.printf("  errors: %s\n", errorBreakdown(charter.results.Errors))
		}
	}
	printPolicies(p, o, points)
	return figures.Write(po.pointFile, policiesFigures(points)...)
}

func perRequest(d time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return d / time.Duration(n)
}

func msPer(d time.Duration) string {
	return fmt.Sprintf("%.3fms", float64(d)/float64(time.Millisecond))
}

// policiesFigures are the points for make bench-scale's admission curve.
func policiesFigures(points []policiesPoint) []figures.Point {
	out := make([]figures.Point, len(points))
	for i, pt := range points {
		out[i] = figures.Point{Curve: "admission", Size: pt.count, Figures: map[string]float64{
			"p99_ms":                 millis(pt.charter.P99),
			"null_p99_ms":            millis(pt.null.P99),
			"cpu_ms_per_review":      millis(pt.cpu[1]),
			"null_cpu_ms_per_review": millis(pt.cpu[0]),
			"errors":                 float64(pt.errors),
			"rate":                   pt.rate,
			"answered_rate":          pt.answered,
		}}
	}
	return out
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// printPolicies prints the curve and its growth against the goal.
func printPolicies(p *printer, o directOptions, points []policiesPoint) {
	if len(points) == 0 {
		return
	}
	p.printf("\n%s\n", p.style(fmt.Sprintf("Admission cost by installed policies at %g/s (direct, POST /validate/fail)", o.rate), bold))
	p.printf("the 17 Pod Security policies in Enforce, then copies of the library's policies in Audit (one in %d matching the Pods, the others another kind or another namespace); %s per webhook in %d rounds against the null webhook\n\n",
		policymix.MatchingEvery, o.duration, o.rounds)
	rows := make([][]string, 0, len(points))
	for _, pt := range points {
		rows = append(rows, []string{strconv.Itoa(pt.count), ms(pt.null.P99), ms(pt.charter.P50), ms(pt.charter.P99),
			msPer(pt.cpu[0]), msPer(pt.cpu[1]), fmt.Sprintf("%.0f", pt.answered), strconv.Itoa(pt.errors)})
	}
	p.table([]string{"POLICIES", "NULL P99", "P50", "P99", "NULL CPU/REVIEW", "CPU/REVIEW", "ANSWERED/S", "ERRORS"}, rows)
	first, last := points[0], points[len(points)-1]
	growth := float64(last.charter.P99) / float64(max(first.charter.P99, 1))
	cpuGrowth := float64(last.cpu[1]) / float64(max(first.cpu[1], 1))
	p.printf("growth %d -> %d policies: p99 %.2fx, CPU per review %.2fx\n", first.count, last.count, growth, cpuGrowth)
	p.verdict(fmt.Sprintf("p99 at %d / at %d", last.count, first.count), fmt.Sprintf("%.2fx", growth), fmt.Sprintf("goal ≤ %gx", policiesGrowthGoal), growth <= policiesGrowthGoal)
}

// intList is a comma-separated list of counts, e.g. 20,200,1000.
type intList []int

func (l *intList) String() string {
	parts := make([]string, len(*l))
	for i, n := range *l {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func (l *intList) Set(v string) error {
	var out []int
	for part := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n <= 0 {
			return fmt.Errorf("%q is not a count above 0", part)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}
