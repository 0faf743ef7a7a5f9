package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/charter-dev/charter/hack/benchscale/figures"
)

// TestPlans: full measures issue 33's points; small the same curves at
// sizes a shared 2-core machine gets through in minutes.
func TestPlans(t *testing.T) {
	for _, tc := range []struct {
		scale string
		want  map[string][]int
	}{
		{"full", map[string][]int{"admission": {20, 200, 1000}, "reports": {1000, 10000, 50000}, "reports-store": {10000, 50000}, "gitops": {10, 100, 1000}, "generate": {1000, 5000}}},
		{"small", map[string][]int{"admission": {20, 200, 1000}, "reports": {500, 1000, 2000}, "reports-store": {1000, 2000}, "gitops": {10, 100, 300}, "generate": {100, 500}}},
	} {
		t.Run(tc.scale, func(t *testing.T) {
			p, err := planFor(tc.scale)
			if err != nil {
				t.Fatal(err)
			}
			curves, err := selectCurves(p, strings.Join(curveNames(), ","))
			if err != nil {
				t.Fatal(err)
			}
			if len(curves) != len(tc.want) {
				t.Fatalf("%d curves, want %d", len(curves), len(tc.want))
			}
			for _, c := range curves {
				if !slices.Equal(c.sizes, tc.want[c.name]) {
					t.Errorf("%s: sizes %v, want %v", c.name, c.sizes, tc.want[c.name])
				}
			}
		})
	}
	if _, err := planFor("huge"); err == nil || !strings.Contains(err.Error(), "want small or full") {
		t.Errorf("planFor(huge): err = %v", err)
	}
}

func TestSelectCurvesRefusesUnknown(t *testing.T) {
	p, _ := planFor("small")
	if _, err := selectCurves(p, "reports,latency"); err == nil || !strings.Contains(err.Error(), `"latency" is not one of admission, reports, reports-store, gitops, generate`) {
		t.Fatalf("err = %v", err)
	}
}

// TestInvocations: admission measures every count in one process, the
// others one process per size, each with the flag of its size.
func TestInvocations(t *testing.T) {
	p, _ := planFor("small")
	curves, err := selectCurves(p, "admission,reports,reports-store,gitops,generate")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"admission":     {"-mode policies -policy-counts 20,200,1000 -rate 1000 -events=false -duration 8s -warmup 2s -rounds 2"},
		"reports":       {"-pods 500", "-pods 1000", "-pods 2000"},
		"reports-store": {"-pods 1000 -stores etcd,postgres", "-pods 2000 -stores etcd,postgres"},
		"gitops":        {"-policies 10 -large-only -charter bin/charter", "-policies 100 -large-only -charter bin/charter", "-policies 300 -large-only -charter bin/charter"},
		"generate":      {"-namespaces 100 -wait 15m", "-namespaces 500 -wait 15m"},
	}
	for _, c := range curves {
		var got []string
		for _, inv := range c.invocations("bin/charter") {
			got = append(got, strings.Join(inv.args, " "))
		}
		if !slices.Equal(got, want[c.name]) {
			t.Errorf("%s: invocations\n%q\nwant\n%q", c.name, got, want[c.name])
		}
	}
}

func point(curve string, size int, figs map[string]float64) figures.Point {
	return figures.Point{Curve: curve, Size: size, Figures: figs}
}

// TestPrintCurve prints a curve with its growth row and goals: the
// reports time goal is judged against n log n at any scale, the memory
// goal only at 50,000 Pods.
func TestPrintCurve(t *testing.T) {
	p, _ := planFor("small")
	curves, _ := selectCurves(p, "admission,reports,reports-store,gitops")
	byName := map[string]curve{}
	for _, c := range curves {
		byName[c.name] = c
	}
	for _, tc := range []struct {
		name   string
		curve  string
		points []figures.Point
		want   []string
	}{
		{
			name: "admission within the goal", curve: "admission",
			points: []figures.Point{
				point("admission", 1000, map[string]float64{"p99_ms": 6, "cpu_ms_per_review": 0.9}),
				point("admission", 20, map[string]float64{"p99_ms": 4, "cpu_ms_per_review": 0.3}),
			},
			want: []string{"growth 50x", "1.50x", "3.00x", "goal: p99 at 1000 policies / p99 at 20: 1.50x (want ≤ 2x (at 1,000 vs 20)) met"},
		},
		{
			name: "admission beyond it", curve: "admission",
			points: []figures.Point{point("admission", 20, map[string]float64{"p99_ms": 4}), point("admission", 1000, map[string]float64{"p99_ms": 9})},
			want:   []string{"2.25x (want ≤ 2x (at 1,000 vs 20)) MISSED"},
		},
		{
			name: "reports at small scale", curve: "reports",
			points: []figures.Point{
				point("reports", 500, map[string]float64{"seconds": 2, "controller_peak_mib": 40}),
				point("reports", 2000, map[string]float64{"seconds": 10, "controller_peak_mib": 60}),
			},
			want: []string{"controller memory at 50000 Pods: not measured (largest point 2000 Pods: 60.0 MiB) (want ≤ 300 MiB) n/a at this scale",
				"time growth 500 -> 2000 Pods: 5.00x (want ≤ 4.89x (n log n; linear 4.00x)) MISSED"},
		},
		{
			name: "reports at full scale", curve: "reports",
			points: []figures.Point{
				point("reports", 1000, map[string]float64{"seconds": 5, "controller_peak_mib": 40}),
				point("reports", 50000, map[string]float64{"seconds": 200, "controller_peak_mib": 250}),
			},
			want: []string{"controller memory at 50000 Pods: 250.0 MiB (want ≤ 300 MiB) met", "40.00x (want ≤ 78.32x"},
		},
		{
			name: "reports in PostgreSQL within the goal", curve: "reports-store",
			points: []figures.Point{
				point("reports-store", 2000, map[string]float64{"etcd_seconds": 20, "postgres_seconds": 18,
					"etcd_reports_etcd_bytes": 16 << 20, "postgres_reports_etcd_bytes": 1 << 20}),
			},
			want: []string{"16.0 MiB", "goal: etcd bytes of the reports at 2000 Pods, PostgreSQL against etcd: 93.8% lower (want ≥ 70% lower) met",
				"goal: time to every report at 2000 Pods, PostgreSQL / etcd: 0.90x (want ≤ 1x (no worse)) met"},
		},
		{
			name: "reports in PostgreSQL beyond it", curve: "reports-store",
			points: []figures.Point{
				point("reports-store", 1000, map[string]float64{"etcd_seconds": 10, "postgres_seconds": 9,
					"etcd_reports_etcd_bytes": 8 << 20, "postgres_reports_etcd_bytes": 0}),
				point("reports-store", 10000, map[string]float64{"etcd_seconds": 50, "postgres_seconds": 60,
					"etcd_reports_etcd_bytes": 80 << 20, "postgres_reports_etcd_bytes": 40 << 20}),
			},
			want: []string{"at 10000 Pods, PostgreSQL against etcd: 50.0% lower (want ≥ 70% lower) MISSED",
				"at 10000 Pods, PostgreSQL / etcd: 1.20x (want ≤ 1x (no worse)) MISSED"},
		},
		{
			name: "no goal", curve: "gitops",
			points: []figures.Point{point("gitops", 10, map[string]float64{"seconds": 1})},
			want:   []string{"goal: none set by issue 33"},
		},
		{
			name: "nothing measured", curve: "gitops",
			want: []string{"no point measured"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printCurve(&b, byName[tc.curve], tc.points)
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}
