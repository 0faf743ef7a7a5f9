// Command bench-background measures the background controller on a local
// control plane: N namespaces are created, each with the UpdateRequest
// admission makes for the default-deny NetworkPolicy policy of
// policies/generate; halfway the controller is stopped and a new one
// started, as a crashed leader would be replaced. It prints the time from
// the last namespace until every NetworkPolicy exists, the controller's
// peak memory, its API writes per trigger, and how many triggers lost
// their NetworkPolicy (UpdateRequests lost by the restart), against the
// targets of issue #14.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/hack/benchscale/figures"
	"github.com/charter-dev/charter/internal/benchmem"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/printer"
	"github.com/charter-dev/charter/reconciler/background"
	"github.com/charter-dev/charter/webhook/server"
	"github.com/charter-dev/charter/webhook/updaterequest"
)

// Targets of issue #14.
const (
	targetNamespaces = 1000
	targetTime       = 30 * time.Second
	targetMemory     = 150 << 20
	charterNamespace = "charter"
	policyFile       = "policies/generate/default-deny-networkpolicy/default-deny-networkpolicy.yaml"
)

func main() {
	n := flag.Int("namespaces", targetNamespaces, "namespaces to create")
	pointFile := flag.String("point-file", "", "also write the figures as a point of make bench-scale's generate curve (JSON) to this file")
	wait := flag.Duration("wait", 3*time.Minute, "longest wait, after the last namespace, for every NetworkPolicy")
	flag.Parse()
	// The managers' own logs would interleave with the figures (and
	// controller-runtime prints a stack trace when no logger was set).
	ctrl.SetLogger(logr.Discard())
	if err := run(*n, *wait, *pointFile); err != nil {
		fmt.Fprintln(os.Stderr, "bench-background:", err)
		os.Exit(1)
	}
}

// writeCounter counts the requests that are not reads.
type writeCounter struct {
	next   http.RoundTripper
	writes atomic.Int64
}

func (w *writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		w.writes.Add(1)
	}
	return w.next.RoundTrip(req)
}

func run(n int, wait time.Duration, pointFile string) error {
	ctx := context.Background()
	root, err := controlplane.ModuleRoot()
	if err != nil {
		return err
	}
	cp, err := controlplane.Start(ctx, controlplane.WithCRDs(filepath.Join(root, "config", "crd", "bases")))
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()
	sch := kruntime.NewScheme()
	for _, add := range []func(*kruntime.Scheme) error{clientgoscheme.AddToScheme, kyvernov1.AddToScheme, kyvernov2.AddToScheme, policiesv1.AddToScheme} {
		if err := add(sch); err != nil {
			return err
		}
	}
	admin := rest.CopyConfig(cp.RESTConfig())
	admin.QPS, admin.Burst = 500, 1000
	cl, err := client.New(admin, client.Options{Scheme: sch})
	if err != nil {
		return err
	}
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: charterNamespace}}); err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(root, policyFile))
	if err != nil {
		return err
	}
	var policy kyvernov1.ClusterPolicy
	if err := yaml.Unmarshal(data, &policy); err != nil {
		return err
	}
	if err := cl.Create(ctx, &policy); err != nil {
		return err
	}
	set, err := engine.Compile([]kyvernov1.PolicyInterface{&policy})
	if err != nil {
		return err
	}

	runtime.GC()
	peak := &benchmem.Peak{}
	stopSampling := peak.Run(50 * time.Millisecond)
	counter := &writeCounter{}
	ccfg := rest.CopyConfig(cp.RESTConfig())
	ccfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	stop, err := startController(ctx, ccfg, sch)
	if err != nil {
		return err
	}

	gen := updaterequest.NewGenerator(cl, charterNamespace, loader.Loaders{}, 0, logr.Discard())
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		restart  sync.Once
		restarts int
	)
	start := time.Now()
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if i == n/2 {
					// The leader dies halfway; a new one takes over.
					restart.Do(func() {
						stop()
						if stop, err = startController(ctx, ccfg, sch); err != nil {
							mu.Lock()
							firstErr = err
							mu.Unlock()
						}
						restarts++
					})
				}
				if err := admitNamespace(ctx, cl, gen, set, fmt.Sprintf("bench-%04d", i)); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	created := time.Now()
	fmt.Printf("created %d namespaces and their UpdateRequests in %s (controller restarted %d time)\n", n, created.Sub(start).Round(time.Millisecond), restarts)

	deadline := created.Add(wait)
	var done int
	for time.Now().Before(deadline) {
		var nps networkingv1.NetworkPolicyList
		if err := cl.List(ctx, &nps, client.MatchingLabels{"generate.kyverno.io/policy-name": policy.Name}); err != nil {
			return err
		}
		if done = len(nps.Items); done >= n {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(created)
	stop()
	stopSampling()
	var urs kyvernov2.UpdateRequestList
	if err := cl.List(ctx, &urs, client.InNamespace(charterNamespace)); err != nil {
		return err
	}
	lost := n - done
	fmt.Printf("NetworkPolicies: %d of %d, %s after the last namespace; UpdateRequests left: %d\n", done, n, elapsed.Round(100*time.Millisecond), len(urs.Items))
	perTrigger := float64(counter.writes.Load()) / float64(n)
	fmt.Printf("controller API writes: %d (%.2f per trigger; admission adds 2 per trigger: create and Pending)\n", counter.writes.Load(), perTrigger)

	t := printer.NewTable("target", "figure", "want", "result")
	verdict := func(met bool) printer.Cell {
		if met {
			return printer.Cell{Text: "met", Style: printer.Green}
		}
		return printer.Cell{Text: "MISSED", Style: printer.Red}
	}
	timeVerdict := printer.Cell{Text: fmt.Sprintf("n/a: set for %d namespaces", targetNamespaces)}
	if n == targetNamespaces {
		timeVerdict = verdict(done == n && elapsed < targetTime)
	}
	t.AddCells(printer.Cell{Text: "time until every NetworkPolicy"}, printer.Cell{Text: elapsed.Round(100 * time.Millisecond).String()},
		printer.Cell{Text: "< " + targetTime.String()}, timeVerdict)
	t.AddCells(printer.Cell{Text: "process peak memory (Go)"}, printer.Cell{Text: fmt.Sprintf("%.1f MiB", benchmem.MiB(peak.Total.Load()))},
		printer.Cell{Text: fmt.Sprintf("< %d MB", targetMemory>>20)}, verdict(peak.Total.Load() < targetMemory))
	t.AddCells(printer.Cell{Text: "controller API writes per trigger"}, printer.Cell{Text: strconv.FormatFloat(perTrigger, 'f', 2, 64)},
		printer.Cell{Text: "-"}, printer.Cell{Text: "-"})
	t.AddCells(printer.Cell{Text: "UpdateRequests lost (1 restart)"}, printer.Cell{Text: strconv.Itoa(lost)},
		printer.Cell{Text: "0"}, verdict(lost == 0))
	fmt.Println()
	if err := t.Write(os.Stdout, printer.ColorEnabled(os.Stdout)); err != nil {
		return err
	}
	return figures.Write(pointFile, figures.Point{Curve: "generate", Size: n, Figures: map[string]float64{
		"seconds":            elapsed.Seconds(),
		"peak_mib":           benchmem.MiB(peak.Total.Load()),
		"writes_per_trigger": perTrigger,
		"lost":               float64(lost),
	}})
}

// admitNamespace creates a namespace and the UpdateRequests admission
// would make for it.
func admitNamespace(ctx context.Context, cl client.Client, gen *updaterequest.Generator, set *engine.PolicySet, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := cl.Create(ctx, ns); err != nil {
		return err
	}
	obj := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name, "uid": string(ns.UID)}}
	req := &engine.Request{Operation: kyvernov1.Create, Object: obj}
	for _, ur := range gen.Build(ctx, server.BackgroundRecord{UID: types.UID(name), Request: req, Sets: []*engine.PolicySet{set}}) {
		if err := cl.Create(ctx, ur); err != nil {
			return err
		}
		ur.Status.State = kyvernov2.Pending
		if err := cl.Status().Update(ctx, ur); err != nil {
			return err
		}
	}
	return nil
}

// startController runs a background controller, as charter serve does,
// and returns what stops it.
func startController(ctx context.Context, cfg *rest.Config, sch *kruntime.Scheme) (func(), error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: sch, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return nil, err
	}
	state, err := clusterstate.New(mgr, logr.Discard())
	if err != nil {
		return nil, err
	}
	if _, err := background.Setup(mgr, background.Options{State: state, Namespace: charterNamespace, Logger: logr.Discard()}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				fmt.Fprintln(os.Stderr, "bench-background: controller:", err)
			}
		})
	}, nil
}
