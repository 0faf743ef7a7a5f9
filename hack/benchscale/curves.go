package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/charter-dev/charter/hack/benchscale/figures"
	"github.com/charter-dev/charter/internal/printer"
)

// curve is one cost curve: the bench that measures it, its sizes at the
// chosen scale, the figures printed and the goals for it.
type curve struct {
	name  string
	title string
	unit  string // what the size counts
	bench string // package path under the module root
	sizes []int
	// invocations are the bench runs that measure the sizes: one per
	// size, or one for every size (admission: one process serves them
	// all in turn, so every point meets the same machine).
	invocations func(charter string) []invocation
	columns     []column
	// goals judge the points, sorted by size; none when the issue sets
	// none for this curve.
	goals func(points []figures.Point) []goal
}

// invocation is one run of a curve's bench; -point-file is added.
type invocation struct {
	label string
	args  []string
}

// column is one figure of a point, as printed.
type column struct {
	header string
	key    string
	format func(v float64) string
}

// goal is one of the goals against what was measured.
type goal struct {
	what, figure, want string
	// met is nil when the run's sizes cannot say (the goal is set at a
	// size this scale does not reach).
	met *bool
}

func seconds(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + " s" }
func millis(v float64) string  { return strconv.FormatFloat(v, 'f', 2, 64) + " ms" }
func mib(v float64) string     { return strconv.FormatFloat(v, 'f', 1, 64) + " MiB" }
func bytesMiB(v float64) string {
	return strconv.FormatFloat(v/(1<<20), 'f', 1, 64) + " MiB"
}
func count(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
func ratio(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// plan is the sizes of each curve at one scale.
type plan map[string][]int

// Goals of issue 33.
const (
	admissionP99Growth = 2.0
	reportsMemoryPods  = 50000
	reportsMemoryMiB   = 300.0
)

func planFor(scale string) (plan, error) {
	switch scale {
	case "small":
		// Admission needs no API server: its points are the at
		// every scale, measured for less time.
		return plan{"admission": {20, 200, 1000}, "reports": {500, 1000, 2000}, "reports-store": {1000, 2000}, "gitops": {10, 100, 300}, "generate": {100, 500}}, nil
	case "full":
		return plan{"admission": {20, 200, 1000}, "reports": {1000, 10000, 50000}, "reports-store": {10000, 50000}, "gitops": {10, 100, 1000}, "generate": {1000, 5000}}, nil
	}
	return nil, fmt.Errorf("-scale %q: want small or full", scale)
}

func curveNames() []string {
	return []string{"admission", "reports", "reports-store", "gitops", "generate"}
}

// selectCurves returns the named curves with the plan's sizes, in the
// order of curveNames.
func selectCurves(p plan, names string) ([]curve, error) {
	want := map[string]bool{}
	for n := range strings.SplitSeq(names, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(curveNames(), n) {
			return nil, fmt.Errorf("-curves: %q is not one of %s", n, strings.Join(curveNames(), ", "))
		}
		want[n] = true
	}
	full := p["reports"][len(p["reports"])-1] >= reportsMemoryPods
	var out []curve
	for _, c := range allCurves(p, full) {
		if want[c.name] {
			out = append(out, c)
		}
	}
	return out, nil
}

// perSize runs the bench once per size with flag set to it.
func perSize(sizes []int, flag string, extra ...string) func(string) []invocation {
	return func(string) []invocation {
		var out []invocation
		for _, n := range sizes {
			out = append(out, invocation{label: strconv.Itoa(n), args: append([]string{"-" + flag, strconv.Itoa(n)}, extra...)})
		}
		return out
	}
}

func allCurves(p plan, full bool) []curve {
	admissionTime := []string{"-duration", "8s", "-warmup", "2s", "-rounds", "2"}
	if full {
		admissionTime = []string{"-duration", "20s", "-warmup", "3s", "-rounds", "4"}
	}
	cs := []curve{
		{
			name: "admission", title: "Admission at 1,000/s by installed policies", unit: "policies",
			bench: "hack/benchadmission",
			columns: []column{
				{"P99", "p99_ms", millis}, {"NULL P99", "null_p99_ms", millis},
				{"CPU/REVIEW", "cpu_ms_per_review", millis}, {"NULL CPU/REVIEW", "null_cpu_ms_per_review", millis},
				{"ANSWERED/S", "answered_rate", func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }},
				{"ERRORS", "errors", count},
			},
			goals: func(points []figures.Point) []goal {
				first, last := points[0], points[len(points)-1]
				g := last.Figures["p99_ms"] / first.Figures["p99_ms"]
				met := g <= admissionP99Growth && last.Size >= 1000 && first.Size <= 20
				return []goal{{
					what:   fmt.Sprintf("p99 at %d policies / p99 at %d", last.Size, first.Size),
					figure: ratio(g) + "x", want: fmt.Sprintf("≤ %gx (at 1,000 vs 20)", admissionP99Growth), met: &met,
				}}
			},
		},
		{
			name: "reports", title: "Background scan by Pods (Pod Security policies in Audit)", unit: "Pods",
			bench: "hack/bench-reports",
			columns: []column{
				{"TIME TO ALL REPORTS", "seconds", seconds}, {"CONTROLLER PEAK (GO)", "controller_peak_mib", mib},
				{"KUBE-APISERVER CPU", "apiserver_cpu_s", seconds}, {"ETCD CPU", "etcd_cpu_s", seconds},
				{"ETCD IN USE", "etcd_in_use_bytes", bytesMiB}, {"ETCD FILE", "etcd_total_bytes", bytesMiB},
				{"REPORT WRITES", "writes", count},
			},
			goals: reportsGoals,
		},
		{
			name: "reports-store", title: "Reports in etcd against reports in PostgreSQL (charter reports-server), the same scan by Pods", unit: "Pods",
			bench: "hack/bench-reports",
			columns: []column{
				{"ETCD: TIME", "etcd_seconds", seconds}, {"PG: TIME", "postgres_seconds", seconds},
				{"ETCD: REPORTS' ETCD BYTES", "etcd_reports_etcd_bytes", bytesMiB}, {"PG: REPORTS' ETCD BYTES", "postgres_reports_etcd_bytes", bytesMiB},
				{"ETCD: KUBE-APISERVER CPU", "etcd_apiserver_cpu_s", seconds}, {"PG: KUBE-APISERVER CPU", "postgres_apiserver_cpu_s", seconds},
				{"PG: POSTGRES CPU", "postgres_postgres_cpu_s", seconds}, {"PG: DATABASE GROWTH", "postgres_reports_pg_bytes", bytesMiB},
			},
			goals: reportsStoreGoals,
		},
		{
			name: "gitops", title: "GitOps revision by policies in the repository (charter serve --controllers=gitsync)", unit: "policies",
			bench: "hack/benchgitops",
			columns: []column{
				{"TIME TO APPLIED (READY)", "seconds", seconds}, {"GITSYNC PEAK RSS", "rss_peak_mib", mib}, {"RSS BEFORE", "rss_before_mib", mib},
			},
		},
		{
			name: "generate", title: "Generate (default-deny NetworkPolicy) by new namespaces, one controller restart halfway", unit: "namespaces",
			bench: "hack/bench-background",
			columns: []column{
				{"TIME TO EVERY NETWORKPOLICY", "seconds", seconds}, {"PEAK MEMORY (GO)", "peak_mib", mib},
				{"WRITES/TRIGGER", "writes_per_trigger", ratio}, {"LOST", "lost", count},
			},
		},
	}
	for i := range cs {
		c := &cs[i]
		c.sizes = p[c.name]
		switch c.name {
		case "admission":
			args := append([]string{"-mode", "policies", "-policy-counts", itoas(c.sizes), "-rate", "1000", "-events=false"}, admissionTime...)
			c.invocations = func(string) []invocation { return []invocation{{label: "all", args: args}} }
		case "reports":
			c.invocations = perSize(c.sizes, "pods")
		case "reports-store":
			c.invocations = perSize(c.sizes, "pods", "-stores", "etcd,postgres")
		case "gitops":
			sizes := c.sizes
			c.invocations = func(charter string) []invocation {
				return perSize(sizes, "policies", "-large-only", "-charter", charter)(charter)
			}
		case "generate":
			c.invocations = perSize(c.sizes, "namespaces", "-wait", "15m")
		}
	}
	return cs
}

// reportsGoals: controller memory at 50,000 Pods, and time no worse than
// n log n in Pods.
func reportsGoals(points []figures.Point) []goal {
	first, last := points[0], points[len(points)-1]
	var out []goal
	mem := goal{what: fmt.Sprintf("controller memory at %d Pods", reportsMemoryPods), want: fmt.Sprintf("≤ %g MiB", reportsMemoryMiB)}
	if last.Size == reportsMemoryPods {
		m := last.Figures["controller_peak_mib"]
		met := m <= reportsMemoryMiB
		mem.figure, mem.met = mib(m), &met
	} else {
		mem.figure = fmt.Sprintf("not measured (largest point %d Pods: %s)", last.Size, mib(last.Figures["controller_peak_mib"]))
	}
	out = append(out, mem)
	if first.Size < last.Size && first.Figures["seconds"] > 0 {
		timeGrowth := last.Figures["seconds"] / first.Figures["seconds"]
		nlogn := float64(last.Size) * math.Log(float64(last.Size)) / (float64(first.Size) * math.Log(float64(first.Size)))
		met := timeGrowth <= nlogn
		out = append(out, goal{
			what:   fmt.Sprintf("time growth %d -> %d Pods", first.Size, last.Size),
			figure: ratio(timeGrowth) + "x", want: fmt.Sprintf("≤ %sx (n log n; linear %sx)", ratio(nlogn), ratio(float64(last.Size)/float64(first.Size))), met: &met,
		})
	}
	return out
}

// reportsStoreGoals judges the largest point: the reports' etcd bytes at
// least 70% lower in PostgreSQL, the time to every report no worse. The
// issue sets them at 10,000 and 50,000 Pods; smaller points are judged the
// same way, with their size said.
func reportsStoreGoals(points []figures.Point) []goal {
	last := points[len(points)-1]
	cut, timeRatio := figures.StoreComparison(last.Figures)
	cutMet, timeMet := cut >= figures.StoreEtcdBytesCut, timeRatio <= 1
	return []goal{
		{
			what:   fmt.Sprintf("etcd bytes of the reports at %d Pods, PostgreSQL against etcd", last.Size),
			figure: strconv.FormatFloat(100*cut, 'f', 1, 64) + "% lower", want: fmt.Sprintf("≥ %g%% lower", 100*figures.StoreEtcdBytesCut), met: &cutMet,
		},
		{
			what:   fmt.Sprintf("time to every report at %d Pods, PostgreSQL / etcd", last.Size),
			figure: ratio(timeRatio) + "x", want: "≤ 1x (no worse)", met: &timeMet,
		},
	}
}

// printCurve prints one curve: a row per point, the growth between the
// smallest and the largest, and the goals.
func printCurve(w io.Writer, c curve, points []figures.Point) {
	color := printer.ColorEnabled(w)
	fmt.Fprintf(w, "\n%s\n", printer.Paint(color, printer.Bold, c.title))
	if len(points) == 0 {
		fmt.Fprintln(w, "  no point measured (see the errors below)")
		return
	}
	slices.SortFunc(points, func(a, b figures.Point) int { return a.Size - b.Size })
	headers := []string{strings.ToUpper(c.unit)}
	for _, col := range c.columns {
		headers = append(headers, col.header)
	}
	t := printer.NewTable(headers...)
	for _, p := range points {
		row := []string{strconv.Itoa(p.Size)}
		for _, col := range c.columns {
			v, ok := p.Figures[col.key]
			if !ok {
				row = append(row, "-")
				continue
			}
			row = append(row, col.format(v))
		}
		t.Add(row...)
	}
	if len(points) > 1 {
		first, last := points[0], points[len(points)-1]
		row := []string{fmt.Sprintf("growth %gx", float64(last.Size)/float64(first.Size))}
		for _, col := range c.columns {
			a, b := first.Figures[col.key], last.Figures[col.key]
			if a == 0 {
				row = append(row, "-")
				continue
			}
			row = append(row, ratio(b/a)+"x")
		}
		t.Add(row...)
	}
	_ = t.Write(w, color)
	if c.goals == nil {
		fmt.Fprintln(w, "goal: none set by issue 33 for this curve")
		return
	}
	for _, g := range c.goals(points) {
		verdict := printer.Cell{Text: "n/a at this scale", Style: printer.Yellow}
		if g.met != nil && *g.met {
			verdict = printer.Cell{Text: "met", Style: printer.Green}
		} else if g.met != nil {
			verdict = printer.Cell{Text: "MISSED", Style: printer.Red}
		}
		fmt.Fprintf(w, "goal: %s: %s (want %s) %s\n", g.what, g.figure, g.want, printer.Paint(color, verdict.Style, verdict.Text))
	}
}

// itoas formats sizes as a comma-separated list.
func itoas(sizes []int) string {
	parts := make([]string, len(sizes))
	for i, n := range sizes {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}
