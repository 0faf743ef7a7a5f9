// Command bench-reports measures the reports controller at scale: it
// starts the local control plane, creates -pods Pods (no kubelet runs
// them), applies charter's Pod Security policies in Audit, runs the
// controller in this process and prints the time until every report is
// written, the controller's peak memory, and its report writes during the
// first scan and during a second full rescan with nothing changed.
//
// -stores etcd,postgres measures the same scan twice in this one run,
// each on a control plane of its own: with reports as custom resources in
// etcd, then with reports in PostgreSQL behind charter reports-server (an
// aggregated API, in this process, as `charter dev --reports-store=postgres`
// runs it), and prints what the reports cost etcd and kube-apiserver in
// each against issue 33's goal (etcd bytes for reports at least 70% lower,
// time to every report no worse).
//
//	go run ./hack/bench-reports -pods 10000
//	go run ./hack/bench-reports -pods 10000 -stores etcd,postgres
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/stdr"
	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/hack/benchscale/figures"
	"github.com/charter-dev/charter/internal/benchmem"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/printer"
	"github.com/charter-dev/charter/internal/reportsserver"
	"github.com/charter-dev/charter/reconciler/reports"
)

func main() {
	pods := flag.Int("pods", 10000, "number of Pods to create")
	namespaces := flag.Int("namespaces", 10, "number of namespaces to spread them over")
	policyDir := flag.String("policies", "policies/pod-security", "folder of policies (one folder per policy)")
	workers := flag.Int("workers", reports.DefaultWorkers, "controller evaluation workers")
	writeWorkers := flag.Int("write-workers", reports.DefaultWriteWorkers, "controller report writes in flight")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the controller's first scan to this file")
	serverProfile := flag.String("server-cpuprofile", "", "write a 30 s CPU profile of kube-apiserver during the first scan to this file")
	sample := flag.String("sample-report", "", "write one report, as stored, to this file")
	pointFile := flag.String("point-file", "", "also write the figures as a point of make bench-scale's reports curve (JSON) to this file (reports-store curve with -stores etcd,postgres)")
	storesFlag := flag.String("stores", storeEtcd, "where reports are kept, comma-separated to measure each in turn: etcd (custom resources), postgres (charter reports-server)")
	flag.Parse()
	// The informers log through controller-runtime, which otherwise
	// prints a stack trace saying no logger was set; the reports server
	// through klog.
	crlog.SetLogger(logger())
	klog.SetLogger(logger())
	stores, err := parseStores(*storesFlag)
	if err == nil {
		err = runStores(stores, *pods, *namespaces, *policyDir, reports.Options{Workers: *workers, WriteWorkers: *writeWorkers}, profiles{*cpuProfile, *serverProfile, *sample}, *pointFile)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-reports:", err)
		os.Exit(1)
	}
}

// The stores reports can be kept in.
const (
	storeEtcd     = "etcd"
	storePostgres = "postgres"
)

func parseStores(flagValue string) ([]string, error) {
	var stores []string
	for store := range strings.SplitSeq(flagValue, ",") {
		store = strings.TrimSpace(store)
		if store != storeEtcd && store != storePostgres {
			return nil, fmt.Errorf("-stores: %q is not etcd or postgres", store)
		}
		if slices.Contains(stores, store) {
			return nil, fmt.Errorf("-stores: %s named twice", store)
		}
		stores = append(stores, store)
	}
	return stores, nil
}

// runStores measures the scan with reports in each store, in turn, and
// writes the point: the reports curve's for one store; for several, the
// reports-store curve's, each figure prefixed with its store.
func runStores(stores []string, nPods, nNamespaces int, policyDir string, opts reports.Options, prof profiles, pointFile string) error {
	if len(stores) == 1 {
		figs, err := run(stores[0], nPods, nNamespaces, policyDir, opts, prof)
		if err != nil {
			return err
		}
		return figures.Write(pointFile, figures.Point{Curve: "reports", Size: nPods, Figures: figs})
	}
	all := map[string]float64{}
	for _, store := range stores {
		fmt.Printf("\n=== reports in %s\n", store)
		figs, err := run(store, nPods, nNamespaces, policyDir, opts, prof)
		if err != nil {
			return fmt.Errorf("reports in %s: %w", store, err)
		}
		for k, v := range figs {
			all[store+"_"+k] = v
		}
	}
	if slices.Contains(stores, storeEtcd) && slices.Contains(stores, storePostgres) {
		printStoreGoals(os.Stdout, all)
	}
	return figures.Write(pointFile, figures.Point{Curve: "reports-store", Size: nPods, Figures: all})
}

// printStoreGoals prints issue 33's goal of reports in PostgreSQL against
// reports in etcd (figures.StoreComparison).
func printStoreGoals(w io.Writer, figs map[string]float64) {
	color := printer.ColorEnabled(w)
	verdict := func(met bool) printer.Cell {
		if met {
			return printer.Cell{Text: "met", Style: printer.Green}
		}
		return printer.Cell{Text: "MISSED", Style: printer.Red}
	}
	cut, timeRatio := figures.StoreComparison(figs)
	t := printer.NewTable("goal", "reports in etcd", "reports in PostgreSQL", "figure", "want", "result")
	t.AddCells(printer.Cell{Text: "etcd bytes the reports added"},
		printer.Cell{Text: fmt.Sprintf("%.2f MiB", figs["etcd_reports_etcd_bytes"]/(1<<20))},
		printer.Cell{Text: fmt.Sprintf("%.2f MiB", figs["postgres_reports_etcd_bytes"]/(1<<20))},
		printer.Cell{Text: fmt.Sprintf("%.1f%% lower", 100*cut)},
		printer.Cell{Text: fmt.Sprintf(">= %.0f%% lower", 100*figures.StoreEtcdBytesCut)}, verdict(cut >= figures.StoreEtcdBytesCut))
	t.AddCells(printer.Cell{Text: "time until every report"},
		printer.Cell{Text: fmt.Sprintf("%.1f s", figs["etcd_seconds"])}, printer.Cell{Text: fmt.Sprintf("%.1f s", figs["postgres_seconds"])},
		printer.Cell{Text: fmt.Sprintf("%.2fx", timeRatio)}, printer.Cell{Text: "<= 1x (no worse)"}, verdict(timeRatio <= 1))
	fmt.Fprintln(w)
	_ = t.Write(w, color)
}

// writeCounter counts report writes (anything but GET on wgpolicyk8s.io)
// and, for the breakdown it prints, every request by method and API group.
type writeCounter struct {
	next   http.RoundTripper
	writes atomic.Int64
	// firstWrite is when the first report write was sent (UnixNano).
	firstWrite atomic.Int64
	// writeBytes sums the bodies of report writes.
	writeBytes atomic.Int64

	mu       sync.Mutex
	requests map[string]int
}

func (w *writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	reports := strings.Contains(req.URL.Path, "/apis/wgpolicyk8s.io/")
	if req.Method != http.MethodGet && reports {
		w.writes.Add(1)
		w.firstWrite.CompareAndSwap(0, time.Now().UnixNano())
		if req.ContentLength > 0 {
			w.writeBytes.Add(req.ContentLength)
		}
	}
	what := "other"
	if reports {
		what = "reports"
	} else if strings.Contains(req.URL.Path, "/pods") {
		what = "pods"
	}
	w.mu.Lock()
	if w.requests == nil {
		w.requests = map[string]int{}
	}
	w.requests[req.Method+" "+what]++
	w.mu.Unlock()
	return w.next.RoundTrip(req)
}

// breakdown returns the request counts so far, e.g. "GET pods=20 POST reports=10000".
func (w *writeCounter) breakdown() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := slices.Sorted(maps.Keys(w.requests))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, w.requests[k])
	}
	return strings.Join(parts, " ")
}

// profiles names the files the benchmark writes for a closer look; empty
// names are not written.
type profiles struct{ controller, server, sampleReport string }

// run measures one scan with reports in store and returns its figures.
func run(store string, nPods, nNamespaces int, policyDir string, opts reports.Options, prof profiles) (map[string]float64, error) {
	cpuProfile := prof.controller
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	root, err := controlplane.ModuleRoot()
	if err != nil {
		return nil, err
	}
	fmt.Println("starting the local control plane")
	cp, err := controlplane.Start(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cp.Stop() }()
	crds, err := controlplane.ReadCRDs(filepath.Join(root, "config", "crd", "bases"))
	if err != nil {
		return nil, err
	}
	var pg *reportsDB
	if store == storePostgres {
		crds = slices.DeleteFunc(crds, reportsserver.ServesCRD)
	}
	if err := controlplane.ApplyCRDs(ctx, cp.RESTConfig(), crds); err != nil {
		return nil, err
	}
	if store == storePostgres {
		local, err := reportsserver.StartLocal(ctx, cp.RESTConfig(), cp.KubeconfigPath())
		defer func() {
			if err := local.Shutdown(); err != nil {
				fmt.Fprintln(os.Stderr, "bench-reports: stopping the reports server:", err)
			}
		}()
		if err != nil {
			return nil, err
		}
		fmt.Printf("reports in PostgreSQL (%s), served by charter reports-server in this process on 127.0.0.1:%d\n", local.DataDir(), local.Port())
		if pg, err = openReportsDB(ctx, local.DSN()); err != nil {
			return nil, err
		}
		defer pg.close()
	}

	cfg := rest.CopyConfig(cp.RESTConfig())
	cfg.QPS, cfg.Burst = 2000, 4000
	cs := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)

	start := time.Now()
	if err := createPods(ctx, cs, nPods, nNamespaces); err != nil {
		return nil, err
	}
	fmt.Printf("created %d Pods in %d namespaces in %s\n", nPods, nNamespaces, time.Since(start).Round(time.Millisecond))
	n, err := applyPolicies(ctx, dyn, filepath.Join(root, policyDir))
	if err != nil {
		return nil, err
	}
	fmt.Printf("applied %d policies from %s in Audit\n", n, policyDir)
	// etcd's database before any report, so the reports' share shows.
	etcdBefore, err := figures.ReadEtcdDB(ctx, cp.EtcdURL())
	if err != nil {
		return nil, err
	}
	pgBefore, err := pg.size(ctx)
	if err != nil {
		return nil, err
	}

	// Only the controller allocates from here on.
	runtime.GC()
	debug.FreeOSMemory()
	baseline := benchmem.GoMemory()
	peak := &benchmem.Peak{}
	stopSampling := peak.Run(50 * time.Millisecond)

	ccfg := rest.CopyConfig(cp.RESTConfig())
	counter := &writeCounter{}
	ccfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	// The controller's own defaults otherwise (QPS and burst included), so
	// the figures are what `charter serve` gets.
	opts.Logger = logger()
	cctx, stopController := context.WithCancel(ctx)
	defer stopController()
	// The process's shared cluster state, as charter serve builds it on
	// its manager's informers.
	state, err := startClusterState(cctx, ccfg)
	if err != nil {
		return nil, err
	}
	opts.State = state
	c, err := reports.New(ccfg, opts)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
	}
	children := childCPU()
	ownCPU := benchmem.ProcessCPU()
	scanStart := time.Now()
	go func() { done <- c.Start(cctx) }()
	if prof.server != "" {
		go func() {
			if err := serverCPUProfile(ctx, cp.RESTConfig(), prof.server); err != nil {
				fmt.Fprintln(os.Stderr, "bench-reports: kube-apiserver profile:", err)
			}
		}()
	}
	for !c.Synced() {
		select {
		case err := <-done:
			return nil, fmt.Errorf("controller stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	firstScan := time.Since(scanStart)
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	controllerCPU := benchmem.ProcessCPU() - ownCPU
	serverCPU := childCPU().since(children)
	select {
	case err := <-done:
		return nil, fmt.Errorf("controller stopped: %v", err)
	default:
	}
	firstWrites := counter.writes.Load()
	firstWriteBytes := counter.writeBytes.Load()
	fmt.Printf("first scan: %d evaluations, %d skipped\n", c.Stats().Evaluations.Load(), c.Stats().Skipped.Load())
	stopSampling()

	count, err := countReports(ctx, cp.RESTConfig())
	if err != nil {
		return nil, err
	}
	etcdAfter, err := figures.ReadEtcdDB(ctx, cp.EtcdURL())
	if err != nil {
		return nil, err
	}
	pgAfter, err := pg.size(ctx)
	if err != nil {
		return nil, err
	}
	if prof.sampleReport != "" {
		if err := writeSampleReport(ctx, dyn, prof.sampleReport); err != nil {
			return nil, err
		}
	}
	writesBefore := counter.writes.Load()
	rescanStart := time.Now()
	if err := c.FullRescan(ctx); err != nil {
		return nil, err
	}
	rescan := time.Since(rescanStart)
	rescanWrites := counter.writes.Load() - writesBefore
	stopController()
	<-done

	fmt.Println()
	fmt.Printf("reports written:                %d (for %d Pods)\n", count, nPods)
	fmt.Printf("time until every report:        %s (first write after %s)\n", firstScan.Round(time.Millisecond),
		time.Unix(0, counter.firstWrite.Load()).Sub(scanStart).Round(time.Millisecond))
	if store == storePostgres {
		fmt.Println("(the reports server runs in this process: the controller's memory and CPU below include it)")
	}
	fmt.Printf("controller peak memory (Go):    %.1f MiB (baseline before start %.1f MiB, peak heap in use %.1f MiB)\n",
		benchmem.MiB(peak.Total.Load()), benchmem.MiB(baseline), benchmem.MiB(peak.Heap.Load()))
	fmt.Printf("CPU during the first scan:      controller %s, %s\n", controllerCPU.Round(time.Millisecond), serverCPU)
	// The scan is CPU-bound: this says how much of the machine it got
	// (others' load shows as a share below the core count) and the time it
	// would take with every core to itself.
	total := controllerCPU
	for _, t := range serverCPU {
		total += t
	}
	fmt.Printf("CPU share of the first scan:    %.2f cores of %d; all cores to itself: %s\n",
		total.Seconds()/firstScan.Seconds(), runtime.NumCPU(), (total / time.Duration(runtime.NumCPU())).Round(time.Millisecond))
	fmt.Printf("API writes, first scan:         %d", firstWrites)
	if firstWrites > 0 {
		fmt.Printf(" (%.0f bytes each; kube-apiserver CPU %s each)", float64(firstWriteBytes)/float64(firstWrites),
			(serverCPU["kube-apiserver"] / time.Duration(firstWrites)).Round(10*time.Microsecond))
	}
	fmt.Println()
	fmt.Printf("API requests, both scans:       %s\n", counter.breakdown())
	fmt.Printf("full rescan, nothing changed:   %s, %d API writes, %d evaluations\n",
		rescan.Round(time.Millisecond), rescanWrites, c.Stats().Evaluations.Load())
	if count < int64(nPods) {
		return nil, fmt.Errorf("only %d of %d reports written", count, nPods)
	}
	fmt.Printf("etcd database (its metrics):    %.1f MiB in use, %.1f MiB file after the first scan (%.1f MiB in use, %.1f MiB file before it)\n",
		benchmem.MiB(uint64(etcdAfter.InUse)), benchmem.MiB(uint64(etcdAfter.Total)), benchmem.MiB(uint64(etcdBefore.InUse)), benchmem.MiB(uint64(etcdBefore.Total)))
	if pg != nil {
		fmt.Printf("PostgreSQL database:            %.1f MiB after the first scan (%.1f MiB before it)\n", pgAfter/(1<<20), pgBefore/(1<<20))
	}
	printTargets(os.Stdout, nPods, firstScan, peak.Total.Load(), rescanWrites)
	return map[string]float64{
		"seconds":                  firstScan.Seconds(),
		"controller_peak_mib":      benchmem.MiB(peak.Total.Load()),
		"apiserver_cpu_s":          serverCPU["kube-apiserver"].Seconds(),
		"etcd_cpu_s":               serverCPU["etcd"].Seconds(),
		"controller_cpu_s":         controllerCPU.Seconds(),
		"etcd_in_use_bytes":        etcdAfter.InUse,
		"etcd_total_bytes":         etcdAfter.Total,
		"etcd_in_use_bytes_before": etcdBefore.InUse,
		"reports":                  float64(count),
		"writes":                   float64(firstWrites),
		"rescan_writes":            float64(rescanWrites),
		// What the reports added to etcd's database: about all of it
		// with reports in etcd, what else the scan wrote otherwise.
		"reports_etcd_bytes": etcdAfter.InUse - etcdBefore.InUse,
		"postgres_cpu_s":     serverCPU["postgres"].Seconds(),
		"postgres_bytes":     pgAfter,
		"reports_pg_bytes":   pgAfter - pgBefore,
	}, nil
}

// The targets for 10,000 Pods on 2 cores.
const (
	targetPods    = 10000
	targetTime    = 60 * time.Second
	targetMemory  = 200 << 20
	targetRescanW = 0
)

// printTargets prints each figure against its target, as a table. The
// time target is set for 10,000 Pods: other counts get no verdict on it
// (a smaller run is dominated by start-up, a larger one is not asked for).
func printTargets(w io.Writer, nPods int, firstScan time.Duration, peakMemory uint64, rescanWrites int64) {
	color := printer.ColorEnabled(w)
	verdict := func(met bool) printer.Cell {
		if met {
			return printer.Cell{Text: "met", Style: printer.Green}
		}
		return printer.Cell{Text: "MISSED", Style: printer.Red}
	}
	timeVerdict := printer.Cell{Text: fmt.Sprintf("n/a: set for %d Pods", targetPods)}
	if nPods == targetPods {
		timeVerdict = verdict(firstScan < targetTime)
	}
	t := printer.NewTable("target", "figure", "want", "result")
	t.AddCells(printer.Cell{Text: "time until every report"}, printer.Cell{Text: firstScan.Round(100 * time.Millisecond).String()},
		printer.Cell{Text: "< " + targetTime.String()}, timeVerdict)
	t.AddCells(printer.Cell{Text: "controller peak memory"}, printer.Cell{Text: fmt.Sprintf("%.1f MiB", benchmem.MiB(peakMemory))},
		printer.Cell{Text: fmt.Sprintf("< %d MB", targetMemory>>20)}, verdict(peakMemory < targetMemory))
	t.AddCells(printer.Cell{Text: "API writes, unchanged rescan"}, printer.Cell{Text: strconv.FormatInt(rescanWrites, 10)},
		printer.Cell{Text: strconv.Itoa(targetRescanW)}, verdict(rescanWrites == targetRescanW))
	fmt.Fprintln(w)
	_ = t.Write(w, color)
}

func createPods(ctx context.Context, cs kubernetes.Interface, nPods, nNamespaces int) error {
	for i := range nNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i)}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		errOut error
	)
	for range 32 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= nPods {
					return
				}
				if err := createPod(ctx, cs, i, nNamespaces); err != nil {
					mu.Lock()
					errOut = err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return errOut
}

// createPod makes every third Pod privileged and every fifth one run
// as root, so reports hold fails as well as passes.
func createPod(ctx context.Context, cs kubernetes.Interface, i, nNamespaces int) error {
	privileged := i%3 == 0
	c := corev1.Container{
		Name: "app", Image: fmt.Sprintf("registry.example/app:%d", i%50),
		SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
	}
	if i%5 != 0 {
		nonRoot := true
		c.SecurityContext.RunAsNonRoot = &nonRoot
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("pod-%05d", i), Namespace: fmt.Sprintf("bench-%d", i%nNamespaces),
			Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%50)},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{c}},
	}
	_, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	return err
}

// applyPolicies creates every <dir>/**/<name>/<name>.yaml policy with its
// failure actions set to Audit.
func applyPolicies(ctx context.Context, dyn dynamic.Interface, dir string) (int, error) {
	gvr := schema.GroupVersionResource{Group: "kyverno.io", Version: "v1", Resource: "clusterpolicies"}
	n := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Base(path) != filepath.Base(filepath.Dir(path))+".yaml" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if u.GetKind() != "ClusterPolicy" {
			return nil
		}
		_ = unstructured.SetNestedField(u.Object, "Audit", "spec", "validationFailureAction")
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
		for _, r := range rules {
			if v, ok := r.(map[string]any)["validate"].(map[string]any); ok {
				delete(v, "failureAction")
			}
		}
		_ = unstructured.SetNestedSlice(u.Object, rules, "spec", "rules")
		if _, err := dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		n++
		return nil
	})
	return n, err
}

func countReports(ctx context.Context, cfg *rest.Config) (int64, error) {
	mc := metadata.NewForConfigOrDie(cfg)
	gvr := schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}
	var n int64
	opts := metav1.ListOptions{Limit: 1000}
	for {
		l, err := mc.Resource(gvr).List(ctx, opts)
		if err != nil {
			return 0, err
		}
		n += int64(len(l.Items))
		if l.Continue == "" {
			return n, nil
		}
		opts.Continue = l.Continue
	}
}

// logger logs the controller to stderr when BENCH_VERBOSE is set.
func logger() logr.Logger {
	if os.Getenv("BENCH_VERBOSE") == "" {
		return logr.Discard()
	}
	stdr.SetVerbosity(1)
	return stdr.New(log.New(os.Stderr, "", log.LstdFlags))
}

// serverCPUProfile fetches a 30 s CPU profile from kube-apiserver's
// /debug/pprof endpoint.
func serverCPUProfile(ctx context.Context, cfg *rest.Config, file string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	data, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "30").
		Timeout(time.Minute).DoRaw(ctx)
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}

// writeSampleReport writes the first PolicyReport as JSON.
func writeSampleReport(ctx context.Context, dyn dynamic.Interface, file string) error {
	gvr := schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}
	l, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	if len(l.Items) == 0 {
		return fmt.Errorf("no report to sample")
	}
	data, err := l.Items[0].MarshalJSON()
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}

// childCPU is the CPU time the running children of this process (etcd,
// kube-apiserver, postgres) and their children (postgres's backends) have
// used, by command name, read from /proc; empty where there is no /proc.
func childCPU() cpuTimes {
	type proc struct {
		ppid, name string
		cpu        time.Duration
	}
	procs := map[string]proc{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state ppid ... utime(14) stime(15).
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(fields[11], 10, 64)
		st, _ := strconv.ParseInt(fields[12], 10, 64)
		name := s[strings.IndexByte(s, '(')+1 : strings.LastIndexByte(s, ')')]
		// USER_HZ is 100 on every Linux this runs on.
		procs[d.Name()] = proc{ppid: fields[1], name: name, cpu: time.Duration(u+st) * 10 * time.Millisecond}
	}
	self := strconv.Itoa(os.Getpid())
	out := cpuTimes{}
	for _, p := range procs {
		if p.ppid == self || procs[p.ppid].ppid == self {
			out[p.name] += p.cpu
		}
	}
	return out
}

// cpuTimes is CPU time by process name.
type cpuTimes map[string]time.Duration

// since returns the CPU each process used since before.
func (c cpuTimes) since(before cpuTimes) cpuTimes {
	out := cpuTimes{}
	for name, t := range c {
		out[name] = t - before[name]
	}
	return out
}

func (c cpuTimes) String() string {
	names := slices.Sorted(maps.Keys(c))
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %s", name, c[name].Round(time.Millisecond))
	}
	return strings.Join(parts, ", ")
}

// startClusterState runs the shared informers and policy cache a charter
// process hands its controllers.
func startClusterState(ctx context.Context, cfg *rest.Config) (*clusterstate.State, error) {
	sch := kruntime.NewScheme()
	for _, add := range []func(*kruntime.Scheme) error{clientgoscheme.AddToScheme, kyvernov1.AddToScheme, kyvernov2.AddToScheme, policiesv1.AddToScheme} {
		if err := add(sch); err != nil {
			return nil, err
		}
	}
	informers, err := crcache.New(cfg, crcache.Options{Scheme: sch})
	if err != nil {
		return nil, err
	}
	state, err := clusterstate.NewForCache(cfg, informers, logger())
	if err != nil {
		return nil, err
	}
	go func() {
		if err := informers.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "bench-reports: informers:", err)
		}
	}()
	go func() {
		if err := state.Policies.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "bench-reports: policy cache:", err)
		}
	}()
	return state, nil
}

// reportsDB reads the size of the reports server's PostgreSQL database; a
// nil one (reports in etcd) reads 0.
type reportsDB struct{ conn *pgx.Conn }

func openReportsDB(ctx context.Context, dsn string) (*reportsDB, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connecting to the reports' PostgreSQL: %w", err)
	}
	return &reportsDB{conn: conn}, nil
}

// size is the database's size on disk in bytes (pg_database_size).
func (db *reportsDB) size(ctx context.Context) (float64, error) {
	if db == nil {
		return 0, nil
	}
	var n int64
	if err := db.conn.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&n); err != nil {
		return 0, fmt.Errorf("the reports' PostgreSQL database size: %w", err)
	}
	return float64(n), nil
}

func (db *reportsDB) close() { _ = db.conn.Close(context.Background()) }
