package main

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/ttl"
	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/reliability"
)

// fastLeases makes a killed leader's Leases expire after 6 s, not 12.
const fastLeases = "--leader-election-retry-period=1s"

// generatePolicyFile generates a default-deny NetworkPolicy in every new
// Namespace: what the kill test interrupts.
const generatePolicyFile = "policies/generate/default-deny-networkpolicy/default-deny-networkpolicy.yaml"

// cleanupNamespace holds the ConfigMaps the kill test's cleanup deletes.
const cleanupNamespace = "killed-cleanup"

// TestReliabilityCharterKilled (issue #31, faults): charter serve is
// killed with SIGKILL while it generates a NetworkPolicy for each of N
// new Namespaces, and again while its TTL cleanup deletes N expired
// ConfigMaps; a new charter serve takes over. The work must resume and
// nothing be done twice: in the API server's audit log, every
// NetworkPolicy is created exactly once (none missed, none created again
// after a delete) and every ConfigMap deleted exactly once, the
// ConfigMaps without a TTL never.
//
// The interrupted process is the one doing the work: the UpdateRequests
// are made first by an admission-only charter, then a charter with the
// background controller is killed as soon as the first NetworkPolicy
// appears; the ConfigMaps expire before a charter with the cleanup
// controller starts, which is killed at the first deletion. The two kills
// run at once, each on a control plane of its own, in the short mode (CI's
// minute), one after the other in the full mode, whose times are figures.
func TestReliabilityCharterKilled(t *testing.T) {
	reliability.Measure(t)
	n := 50
	if reliability.Full() {
		n = 1000
	}
	t.Run("mid-generate", func(t *testing.T) {
		if !reliability.Full() {
			t.Parallel()
		}
		f := startFaultCluster(t.Context(), t)
		policies := f.apply(repoFile(t, generatePolicyFile))
		gen := killMidGenerate(t, f, policies, n)
		reliability.Report(t, reliability.Figure{
			Part:   "fault: charter killed (SIGKILL) mid-generate",
			Figure: gen.figure,
			Target: "resumed; each generated once, none missed",
			OK:     gen.ok,
		})
	})
	t.Run("mid-cleanup", func(t *testing.T) {
		if !reliability.Full() {
			t.Parallel()
		}
		f := startFaultCluster(t.Context(), t)
		f.createNamespace(cleanupNamespace)
		cleanup := killMidCleanup(t, f, n)
		reliability.Report(t, reliability.Figure{
			Part:   "fault: charter killed (SIGKILL) mid-cleanup",
			Figure: cleanup.figure,
			Target: "resumed; each deleted once, none missed, nothing else",
			OK:     cleanup.ok,
		})
	})
}

type faultOutcome struct {
	figure string
	ok     bool
}

func killMidGenerate(t *testing.T, f *faultCluster, policies []*unstructured.Unstructured, n int) faultOutcome {
	ctx := f.ctx
	admission := f.startCharter(controllerAdmission, fastLeases)
	admission.waitHealthy(t)
	f.waitReady(policies)
	if err := waitForWebhook(ctx, f.cl); err != nil {
		t.Fatal(err)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("killed-gen-%04d", i)
	}
	// Through admission, as kubectl would: each creation makes its
	// UpdateRequest.
	forEachParallel(t, names, 8, func(name string) error {
		return f.cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	waitFor(t, fmt.Sprintf("%d UpdateRequests", n), 2*time.Minute, func() error {
		if got := len(f.updateRequests()); got < n {
			return fmt.Errorf("%d", got)
		}
		return nil
	})
	admission.stop(t)

	// The background controller starts on N pending UpdateRequests and
	// is killed at its first NetworkPolicy. Every creation and deletion
	// from here on is an event of this watch, in etcd's order.
	events := f.tally(&networkingv1.NetworkPolicyList{}, "")
	defer events.stop()
	worker := f.startCharter(controllerAdmission+","+controllerBackground, fastLeases)
	events.waitFirst(t, worker, watch.Added)
	worker.kill(t)
	doneAtKill := len(f.generated(names))
	pendingAtKill := len(f.updateRequests())

	restarted := time.Now()
	next := f.startCharter(controllerAdmission+","+controllerBackground, fastLeases)
	waitFor(t, fmt.Sprintf("a NetworkPolicy in each of the %d Namespaces and no UpdateRequest left", n), 5*time.Minute, func() error {
		if got := len(f.generated(names)); got < n {
			return fmt.Errorf("%d of %d NetworkPolicies", got, n)
		}
		if left := f.updateRequests(); len(left) > 0 {
			return fmt.Errorf("%d UpdateRequests left", len(left))
		}
		return nil
	})
	resumed := time.Since(restarted)
	next.stop(t)

	added, deleted := events.counts(t)
	twice, missed := onceEach(names, func(ns string) int { return added[ns+"/default-deny"] })
	out := faultOutcome{
		figure: fmt.Sprintf("killed with %d of %d NetworkPolicies generated, %d UpdateRequests pending, %d writes in flight; a new charter generated the rest in %s: %d created once, %d twice, %d never, %d deleted",
			doneAtKill, n, pendingAtKill, inFlightAtKill(f.audited("networkpolicies")), resumed.Round(100*time.Millisecond), n-len(twice)-len(missed), len(twice), len(missed), sumCounts(deleted)),
		ok: len(twice) == 0 && len(missed) == 0 && sumCounts(deleted) == 0,
	}
	if doneAtKill >= n || pendingAtKill == 0 {
		// Nothing was in flight: the kill tested nothing.
		out.figure += ": nothing was left to do when charter was killed"
		out.ok = false
	}
	if len(twice)+len(missed) > 0 {
		t.Logf("created twice: %s; never: %s", strings.Join(first(twice, 10), ", "), strings.Join(first(missed, 10), ", "))
	}
	return out
}

func killMidCleanup(t *testing.T, f *faultCluster, n int) faultOutcome {
	ctx := f.ctx
	ns := cleanupNamespace
	expiring := make([]string, n)
	for i := range expiring {
		expiring[i] = fmt.Sprintf("expiring-%04d", i)
	}
	kept := []string{"kept-0", "kept-1", "kept-2"}
	forEachParallel(t, append(append([]string{}, expiring...), kept...), 8, func(name string) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if strings.HasPrefix(name, "expiring-") {
			cm.Labels = map[string]string{ttl.Label: "1s"}
		}
		return f.cl.Create(ctx, cm)
	})
	// Every TTL is over before a cleanup controller runs.
	time.Sleep(time.Second)

	events := f.tally(&corev1.ConfigMapList{}, ns)
	defer events.stop()
	worker := f.startCharter(controllerCleanup, fastLeases)
	events.waitFirst(t, worker, watch.Deleted)
	worker.kill(t)
	leftAtKill := len(f.configMaps(ns, true))

	restarted := time.Now()
	next := f.startCharter(controllerCleanup, fastLeases)
	waitFor(t, fmt.Sprintf("the %d expired ConfigMaps deleted", n), 5*time.Minute, func() error {
		if left := len(f.configMaps(ns, true)); left > 0 {
			return fmt.Errorf("%d left", left)
		}
		return nil
	})
	resumed := time.Since(restarted)
	next.stop(t)

	_, deleted := events.counts(t)
	count := func(name string) int { return deleted[ns+"/"+name] }
	twice, missed := onceEach(expiring, count)
	_, notDeleted := onceEach(kept, count)
	wrongly := len(kept) - len(notDeleted)
	out := faultOutcome{
		figure: fmt.Sprintf("killed with %d of %d expired ConfigMaps left, %d deletions in flight; a new charter deleted the rest in %s: %d deleted once, %d twice, %d never, %d of %d without a TTL deleted",
			leftAtKill, n, inFlightAtKill(f.audited("configmaps")), resumed.Round(100*time.Millisecond), n-len(twice)-len(missed), len(twice), len(missed), wrongly, len(kept)),
		ok: len(twice) == 0 && len(missed) == 0 && wrongly == 0,
	}
	if leftAtKill == 0 {
		out.figure += ": nothing was left to do when charter was killed"
		out.ok = false
	}
	return out
}

// eventTally counts a watch's ADDED and DELETED events by
// namespace/name: each is an object created or deleted, as etcd saw it,
// whatever the writer was told (a writer killed mid-request gets no
// answer, and the API server audits a 504 for a write it made).
type eventTally struct {
	w              watch.Interface
	mu             sync.Mutex
	added, deleted map[string]int
	firstAdded     chan struct{}
	firstDeleted   chan struct{}
	ended          chan struct{}
}

// tally watches the objects of list's kind in namespace (every one when
// empty) from now on.
func (f *faultCluster) tally(list client.ObjectList, namespace string) *eventTally {
	f.t.Helper()
	if err := f.cl.List(f.ctx, list, client.InNamespace(namespace)); err != nil {
		f.t.Fatal(err)
	}
	w, err := f.cl.Watch(f.ctx, list, client.InNamespace(namespace), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
	if err != nil {
		f.t.Fatal(err)
	}
	e := &eventTally{w: w, added: map[string]int{}, deleted: map[string]int{},
		firstAdded: make(chan struct{}), firstDeleted: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(e.ended)
		for ev := range w.ResultChan() {
			obj, ok := ev.Object.(client.Object)
			if !ok {
				continue // an error event: the watch ends
			}
			key := obj.GetNamespace() + "/" + obj.GetName()
			e.mu.Lock()
			switch ev.Type {
			case watch.Added:
				if len(e.added) == 0 {
					close(e.firstAdded)
				}
				e.added[key]++
			case watch.Deleted:
				if len(e.deleted) == 0 {
					close(e.firstDeleted)
				}
				e.deleted[key]++
			}
			e.mu.Unlock()
		}
	}()
	return e
}

// waitFirst waits for the first event of type typ, what p does first.
func (e *eventTally) waitFirst(t *testing.T, p *charterProcess, typ watch.EventType) {
	t.Helper()
	first := e.firstAdded
	if typ == watch.Deleted {
		first = e.firstDeleted
	}
	select {
	case <-first:
	case <-e.ended:
		t.Fatalf("the watch ended before %s wrote anything", p.name)
	case <-p.exited:
		t.Fatalf("%s exited (%v) before it wrote anything:\n%s", p.name, p.err, p.tail(30))
	case <-time.After(3 * time.Minute):
		t.Fatalf("%s wrote nothing within 3 minutes:\n%s", p.name, p.tail(30))
	}
}

// counts are the creations and deletions seen so far; the watch must
// not have ended, or some would be missing.
func (e *eventTally) counts(t *testing.T) (added, deleted map[string]int) {
	t.Helper()
	select {
	case <-e.ended:
		t.Fatal("the watch ended early: its counts are incomplete")
	default:
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.added), maps.Clone(e.deleted)
}

func (e *eventTally) stop() { e.w.Stop() }

// inFlightAtKill counts the writes a killed charter never heard the
// answer to: the API server audits them 504.
func inFlightAtKill(events []auditEvent) int {
	n := 0
	for _, ev := range events {
		if ev.ResponseStatus.Code == http.StatusGatewayTimeout {
			n++
		}
	}
	return n
}

// updateRequests lists the UpdateRequests in charter's namespace.
func (f *faultCluster) updateRequests() []kyvernov2.UpdateRequest {
	f.t.Helper()
	var urs kyvernov2.UpdateRequestList
	if err := f.cl.List(f.ctx, &urs, client.InNamespace(faultNamespace)); err != nil {
		f.t.Fatal(err)
	}
	return urs.Items
}

// generated lists the namespaces of names that hold the generated
// default-deny NetworkPolicy.
func (f *faultCluster) generated(names []string) []string {
	f.t.Helper()
	var nps networkingv1.NetworkPolicyList
	if err := f.cl.List(f.ctx, &nps); err != nil {
		f.t.Fatal(err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []string
	for _, np := range nps.Items {
		if np.Name == "default-deny" && want[np.Namespace] {
			out = append(out, np.Namespace)
		}
	}
	return out
}

// configMaps lists the ConfigMaps of ns, those with a TTL label only when
// withTTL.
func (f *faultCluster) configMaps(ns string, withTTL bool) []corev1.ConfigMap {
	f.t.Helper()
	var cms corev1.ConfigMapList
	opts := []client.ListOption{client.InNamespace(ns)}
	if withTTL {
		opts = append(opts, client.HasLabels{ttl.Label})
	}
	if err := f.cl.List(f.ctx, &cms, opts...); err != nil {
		f.t.Fatal(err)
	}
	return cms.Items
}

// forEachParallel runs do for each item, workers at a time, and fails
// the test on the first error.
func forEachParallel(t *testing.T, items []string, workers int, do func(string) error) {
	t.Helper()
	work := make(chan string)
	errs := make(chan error, len(items))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for item := range work {
				if err := do(item); err != nil {
					errs <- fmt.Errorf("%s: %w", item, err)
				}
			}
		})
	}
	for _, item := range items {
		work <- item
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// onceEach sorts names by count: those counted more than once, and
// those never.
func onceEach(names []string, count func(string) int) (twice, never []string) {
	for _, name := range names {
		switch c := count(name); {
		case c == 0:
			never = append(never, name)
		case c > 1:
			twice = append(twice, fmt.Sprintf("%s (%d)", name, c))
		}
	}
	return twice, never
}

// repoFile is the text of a file of this checkout, by its slash path.
func repoFile(t *testing.T, path string) string {
	t.Helper()
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func sumCounts(m map[string]int) int {
	total := 0
	for _, c := range m {
		total += c
	}
	return total
}

func first(s []string, n int) []string {
	sort.Strings(s)
	if len(s) > n {
		return s[:n]
	}
	return s
}
