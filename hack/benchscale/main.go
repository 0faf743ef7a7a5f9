// Command benchscale prints charter's cost curves (issue 33, item 1):
// how admission, the background scan, a GitOps revision and generate
// grow with the number of policies, Pods, policies in Git and namespaces.
// Every point is measured in this one run, each by the bench that
// measures it alone (benchadmission -mode policies, bench-reports,
// benchgitops -large-only, bench-background) in a process of its own, so
// one point's memory never counts in the next; each bench writes its
// figures to a point file this command reads back. It prints each curve,
// the growth between its smallest and largest point, and the goal
// beside it. It asserts nothing: a missed goal is printed, not failed.
//
//	go run ./hack/benchscale -scale small   # a few minutes
//	go run ./hack/benchscale -scale full    # the points: an hour or more on 2 cores
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/charter-dev/charter/hack/benchscale/figures"
	"github.com/charter-dev/charter/internal/controlplane"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("bench-scale", flag.ExitOnError)
	scale := fs.String("scale", "small", "small (a few minutes on 2 cores) or full (issue 33's points)")
	charter := fs.String("charter", filepath.Join(root, "bin", "charter"), "the charter binary (make build), for the GitOps curve")
	out := fs.String("out", filepath.Join(root, "bin", "bench-scale"), "folder for each point's log and the points of the run (points.json)")
	curvesFlag := fs.String("curves", strings.Join(curveNames(), ","), "curves to measure, comma-separated")
	goBin := fs.String("go", "go", "the go command that builds the benches")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	plan, err := planFor(*scale)
	if err != nil {
		return err
	}
	curves, err := selectCurves(plan, *curvesFlag)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	bins, err := os.MkdirTemp("", "bench-scale-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bins)
	fmt.Fprintln(os.Stderr, "building the benches")
	for _, c := range curves {
		if err := build(ctx, *goBin, root, c.bench, filepath.Join(bins, filepath.Base(c.bench))); err != nil {
			return err
		}
	}

	started := time.Now()
	loadBefore := loadAverage()
	var (
		points []figures.Point
		failed []error
	)
	for _, c := range curves {
		for _, inv := range c.invocations(*charter) {
			name := c.name + "-" + inv.label
			pointFile := filepath.Join(*out, name+".json")
			logFile := filepath.Join(*out, name+".log")
			args := append(inv.args, "-point-file", pointFile)
			fmt.Fprintf(os.Stderr, "%s: %s %s (log: %s)\n", name, filepath.Base(c.bench), strings.Join(args, " "), logFile)
			t0 := time.Now()
			if err := runPoint(ctx, root, filepath.Join(bins, filepath.Base(c.bench)), args, logFile); err != nil {
				failed = append(failed, fmt.Errorf("%s: %w (log: %s)", name, err, logFile))
				if ctx.Err() != nil {
					return errors.Join(failed...)
				}
				continue
			}
			got, err := figures.Read(pointFile)
			if err != nil {
				failed = append(failed, fmt.Errorf("%s: %w", name, err))
				continue
			}
			points = append(points, got...)
			fmt.Fprintf(os.Stderr, "%s: done in %s\n", name, time.Since(t0).Round(time.Second))
		}
	}
	if err := figures.Write(filepath.Join(*out, "points.json"), points...); err != nil {
		return err
	}
	fmt.Printf("charter cost curves (SCALE=%s), %d CPUs, measured %s; load average %s at the start, %s at the end; %s in all\n",
		*scale, runtime.NumCPU(), started.UTC().Format("2006-01-02 15:04 UTC"), loadBefore, loadAverage(), time.Since(started).Round(time.Second))
	for _, c := range curves {
		printCurve(os.Stdout, c, pointsOf(points, c.name))
	}
	return errors.Join(failed...)
}

// build compiles one bench (a package path under the module root).
func build(ctx context.Context, goBin, root, pkg, out string) error {
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, "./"+pkg)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %s: %w", pkg, err)
	}
	return nil
}

// runPoint runs one bench to its end, its output to logFile; the last
// lines of the log come with a failure.
func runPoint(ctx context.Context, root, bin string, args []string, logFile string) error {
	f, err := os.Create(logFile)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = f, f
	// The bench's own control plane goes with it: Ctrl-C reaches the
	// bench, which stops what it started.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w; last lines:\n%s", err, tail(logFile, 8))
	}
	return nil
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// loadAverage is the 1, 5 and 15 minute load average, as uptime prints it.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(data))
	if len(fields) < 3 {
		return "unknown"
	}
	return strings.Join(fields[:3], ", ")
}

func pointsOf(points []figures.Point, curve string) []figures.Point {
	var out []figures.Point
	for _, p := range points {
		if p.Curve == curve {
			out = append(out, p)
		}
	}
	return out
}
