// Command bench-cleanup measures the cleanup controller's TTL label at
// scale: it starts the local control plane, creates -objects ConfigMaps
// whose cleanup.kyverno.io/ttl lies a day ahead, runs the controller in
// this process until it tracks them all, then creates -wave ConfigMaps
// whose TTL is one absolute instant, and prints the time from that
// deadline until the last of them is gone and the controller's peak
// memory while it tracks them all.
//
//	go run ./hack/bench-cleanup -objects 100000 -wave 10000
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/stdr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/engine/ttl"
	"github.com/charter-dev/charter/internal/benchmem"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/printer"
	"github.com/charter-dev/charter/reconciler/cleanup"
)

// Targets of issue #16, set for 100,000 tracked objects and a wave of
// 10,000.
const (
	targetObjects = 100000
	targetWave    = 10000
	targetTime    = 60 * time.Second
	targetMemory  = 150 << 20
)

func main() {
	objects := flag.Int("objects", targetObjects, "ConfigMaps with a TTL a day ahead that the controller tracks")
	wave := flag.Int("wave", targetWave, "ConfigMaps whose TTL expires at one instant")
	namespaces := flag.Int("namespaces", 10, "namespaces to spread them over")
	workers := flag.Int("workers", cleanup.DefaultTTLWorkers, "TTL deletions at once")
	qps := flag.Float64("qps", cleanup.DefaultQPS, "the controller's API requests per second")
	flag.Parse()
	ctrl.SetLogger(logger())
	if err := run(*objects, *wave, *namespaces, cleanup.Options{TTLWorkers: *workers, QPS: float32(*qps)}); err != nil {
		log.Fatal(err)
	}
}

func run(nObjects, nWave, nNamespaces int, opts cleanup.Options) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	root, err := controlplane.ModuleRoot()
	if err != nil {
		return err
	}
	fmt.Println("starting the local control plane")
	cp, err := controlplane.Start(ctx, controlplane.WithCRDs(filepath.Join(root, "config", "crd", "bases")))
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()

	cfg := rest.CopyConfig(cp.RESTConfig())
	cfg.QPS, cfg.Burst = 5000, 10000
	cs := kubernetes.NewForConfigOrDie(cfg)
	for i := range nNamespaces {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace(i)}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "charter"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	start := time.Now()
	if err := createConfigMaps(ctx, cs, "tracked", nObjects, nNamespaces, "1d"); err != nil {
		return err
	}
	fmt.Printf("created %d ConfigMaps with cleanup.kyverno.io/ttl: 1d in %s\n", nObjects, time.Since(start).Round(time.Millisecond))

	// Only the controller allocates from here on.
	runtime.GC()
	debug.FreeOSMemory()
	baseline := benchmem.GoMemory()
	peak := &benchmem.Peak{}
	stopSampling := peak.Run(50 * time.Millisecond)

	stopController, err := startController(ctx, cp.RESTConfig(), opts)
	if err != nil {
		return err
	}
	defer stopController()
	start = time.Now()
	if err := waitFor(ctx, 5*time.Minute, func() bool { return metricValue(cleanup.TTLTrackedMetric) >= float64(nObjects) }); err != nil {
		return fmt.Errorf("waiting for the controller to track %d objects (tracks %.0f): %w", nObjects, metricValue(cleanup.TTLTrackedMetric), err)
	}
	fmt.Printf("controller tracks %d objects %s after its start\n", nObjects, time.Since(start).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	trackingPeak := peak.Total.Load()

	// The wave: every object expires at one absolute instant, far enough
	// ahead that all of them exist and are tracked by then.
	deadline := time.Now().Add(15*time.Second + time.Duration(nWave)*time.Second/400).Truncate(time.Second)
	value := deadline.UTC().Format(ttl.TimestampLayout)
	start = time.Now()
	if err := createConfigMaps(ctx, cs, "wave", nWave, nNamespaces, value); err != nil {
		return err
	}
	fmt.Printf("created %d ConfigMaps with cleanup.kyverno.io/ttl: %s in %s\n", nWave, value, time.Since(start).Round(time.Millisecond))
	if time.Now().After(deadline) {
		fmt.Println("warning: the wave was not all created before its deadline; the figure includes creation")
	}
	if err := waitFor(ctx, 10*time.Minute, func() bool { return metricValue(cleanup.TTLDeletedMetric) >= float64(nWave) }); err != nil {
		return fmt.Errorf("waiting for %d deletions (%.0f so far): %w", nWave, metricValue(cleanup.TTLDeletedMetric), err)
	}
	waveTime := time.Since(deadline)
	left, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: "bench=wave", Limit: 1})
	if err != nil {
		return err
	}
	if len(left.Items) > 0 {
		return fmt.Errorf("ConfigMaps of the wave left after %d deletions: %s/%s", nWave, left.Items[0].Namespace, left.Items[0].Name)
	}
	stopSampling()
	fmt.Printf("the wave of %d was gone %s after its deadline\n", nWave, waveTime.Round(100*time.Millisecond))
	fmt.Printf("controller peak memory (Go): %.1f MiB while tracking %d (%.1f MiB with the wave; baseline before start %.1f MiB, peak heap in use %.1f MiB)\n",
		benchmem.MiB(trackingPeak), nObjects, benchmem.MiB(peak.Total.Load()), benchmem.MiB(baseline), benchmem.MiB(peak.Heap.Load()))
	printTargets(os.Stdout, nObjects, nWave, waveTime, trackingPeak)
	return nil
}

func namespace(i int) string { return fmt.Sprintf("bench-cleanup-%d", i) }

// createConfigMaps creates n ConfigMaps labelled bench=<name> and the TTL,
// 64 at a time.
func createConfigMaps(ctx context.Context, cs kubernetes.Interface, name string, n, nNamespaces int, ttlValue string) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
					Namespace: namespace(i % nNamespaces), Name: fmt.Sprintf("%s-%d", name, i),
					Labels: map[string]string{"bench": name, ttl.Label: ttlValue},
				}}
				if _, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// startController runs the cleanup controller as charter serve does
// (without leader election), on the process's shared cluster state.
func startController(ctx context.Context, cfg *rest.Config, opts cleanup.Options) (stop func(), err error) {
	sch := kruntime.NewScheme()
	for _, add := range []func(*kruntime.Scheme) error{clientgoscheme.AddToScheme, kyvernov1.AddToScheme, kyvernov2.AddToScheme, policiesv1.AddToScheme} {
		if err := add(sch); err != nil {
			return nil, err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: sch, Metrics: metricsserver.Options{BindAddress: "0"}, Logger: logger()})
	if err != nil {
		return nil, err
	}
	state, err := clusterstate.New(mgr, logger())
	if err != nil {
		return nil, err
	}
	opts.State, opts.Namespace, opts.Log = state, "charter", logger()
	if err := cleanup.Setup(mgr, opts); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "bench-cleanup: manager:", err)
		}
	}, nil
}

// metricValue sums every series of a metric in controller-runtime's
// registry, where the controller records.
func metricValue(name string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if c := m.GetCounter(); c != nil {
				sum += c.GetValue()
			}
			if g := m.GetGauge(); g != nil {
				sum += g.GetValue()
			}
		}
	}
	return sum
}

func waitFor(ctx context.Context, within time.Duration, done func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for !done() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// printTargets prints each figure against its target. The targets are
// set for 100,000 tracked objects and a wave of 10,000: other counts get
// no verdict.
func printTargets(w io.Writer, nObjects, nWave int, waveTime time.Duration, peakMemory uint64) {
	verdict := func(met, applies bool, setFor string) printer.Cell {
		switch {
		case !applies:
			return printer.Cell{Text: "n/a: set for " + setFor}
		case met:
			return printer.Cell{Text: "met", Style: printer.Green}
		}
		return printer.Cell{Text: "MISSED", Style: printer.Red}
	}
	t := printer.NewTable("target", "figure", "want", "result")
	t.AddCells(printer.Cell{Text: fmt.Sprintf("%d expired objects gone after the deadline", nWave)}, printer.Cell{Text: waveTime.Round(100 * time.Millisecond).String()},
		printer.Cell{Text: "< " + targetTime.String()}, verdict(waveTime < targetTime, nWave == targetWave, "a wave of 10000"))
	t.AddCells(printer.Cell{Text: fmt.Sprintf("peak memory tracking %d TTL objects", nObjects)}, printer.Cell{Text: fmt.Sprintf("%.1f MiB", benchmem.MiB(peakMemory))},
		printer.Cell{Text: fmt.Sprintf("< %d MB", targetMemory>>20)}, verdict(peakMemory < targetMemory, nObjects == targetObjects, "100000 objects"))
	fmt.Fprintln(w)
	_ = t.Write(w, printer.ColorEnabled(w))
}

// logger logs the controller to stderr when BENCH_VERBOSE is set.
func logger() logr.Logger {
	if os.Getenv("BENCH_VERBOSE") == "" {
		return logr.Discard()
	}
	return stdr.New(log.New(os.Stderr, "", log.LstdFlags))
}
