package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/internal/reliability"
)

// restartPolicies: admission refuses Pods without a team label; the
// background scan reports ConfigMaps without one (one PolicyReport each).
const restartPolicies = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-team}
spec:
  background: false
  rules:
  - name: check-team
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      failureAction: Enforce
      message: "label team is required"
      pattern: {metadata: {labels: {team: "?*"}}}
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: configmap-team}
spec:
  background: true
  rules:
  - name: check-team
    match: {any: [{resources: {kinds: [ConfigMap], namespaces: [scanned]}}]}
    validate:
      failureAction: Audit
      message: "label team is required"
      pattern: {metadata: {labels: {team: "?*"}}}
`

// TestReliabilityAPIServerRestart (issue #31, faults): while reviews go
// through the API server to charter's webhook at a fixed rate (500 a
// second in the full mode), Namespaces are created (each gets a
// NetworkPolicy through an UpdateRequest) and ConfigMaps (each gets a
// PolicyReport from the background scan), kube-apiserver is stopped and
// started again. Asserted: every review the API server sent charter was
// answered (admitted, or refused by the policy); nothing the API server
// refused was refused before it went down; the controllers resumed: each
// Namespace got its NetworkPolicy, created once, through one
// UpdateRequest, none left; each ConfigMap its report, with one result.
// charter runs as deployed, with leader election: its Leases, not renewed
// while the API server is away, are lost, and the process must go on
// serving admission throughout and lead again (it never exits).
func TestReliabilityAPIServerRestart(t *testing.T) {
	reliability.Measure(t)
	// duration is the load's, restart aside: a third before it, the rest
	// after.
	rate, duration := 100, 15*time.Second
	if reliability.Full() {
		rate, duration = 500, 90*time.Second
	}
	ctx := t.Context()
	f := startFaultCluster(ctx, t)
	policies := f.apply(restartPolicies + "\n---\n" + repoFile(t, generatePolicyFile))
	f.createNamespace("load")
	f.createNamespace("scanned")
	// A renew deadline of 2.5 s: shorter than any restart, so the
	// Leases are lost while the API server is away.
	charter := f.startCharter(strings.Join([]string{controllerAdmission, controllerBackground, controllerReports}, ","), "--leader-election-retry-period=500ms")
	charter.waitHealthy(t)
	f.waitReady(policies)
	waitFor(t, "an unlabelled Pod refused by charter", 2*time.Minute, func() error {
		return refusedByPolicy(f.cl.Create(ctx, reviewPod("load", "probe", false), client.DryRunAll))
	})

	load := startReviewLoad(ctx, f.cl, "load", rate, 0)
	namespaces := keepCreating(ctx, f.cl, 250*time.Millisecond, func(i int) client.Object {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("restart-gen-%04d", i)}}
	})
	configMaps := keepCreating(ctx, f.cl, 500*time.Millisecond, func(i int) client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "scanned", Name: fmt.Sprintf("scanned-%04d", i)}}
	})

	time.Sleep(duration / 3)
	down := time.Now()
	if err := f.cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	// As long again after the restart, whatever it took: the API server
	// back, its webhook calls must be answered as before.
	time.Sleep(duration * 2 / 3)
	reviews := load.stop()
	nsNames, cmNames := namespaces.stop(), configMaps.stop()

	// The controllers resume: every Namespace its NetworkPolicy, every
	// UpdateRequest done, every ConfigMap its report.
	waitFor(t, "a NetworkPolicy in each Namespace and no UpdateRequest left", 5*time.Minute, func() error {
		if got := len(f.generated(nsNames)); got < len(nsNames) {
			return fmt.Errorf("%d of %d NetworkPolicies", got, len(nsNames))
		}
		if left := f.updateRequests(); len(left) > 0 {
			return fmt.Errorf("%d UpdateRequests left", len(left))
		}
		return nil
	})
	waitFor(t, "a report with one result for each ConfigMap", 5*time.Minute, func() error {
		if n, why := f.reportedOnce("scanned", cmNames, "configmap-team"); n < len(cmNames) {
			return fmt.Errorf("%d of %d: %s", n, len(cmNames), why)
		}
		return nil
	})

	writes := countWrites(f.audited("networkpolicies"))
	requests := f.updateRequestTriggers()
	twice, missed := onceEach(nsNames, func(ns string) int { return writes.created[ns+"/default-deny"] })
	urTwice, urLost := onceEach(nsNames, func(ns string) int { return requests[ns] })
	s := reviews.summarize(down)
	alive := charter.running()
	lost, leads := charter.leaseTerms(t)
	ok := alive && leads && s.failed == 0 && s.answered > 0 && len(twice)+len(missed)+len(urLost)+len(urTwice) == 0
	if !alive {
		t.Logf("charter exited (%v):\n%s", charter.err, charter.tail(30))
	}
	for i, fl := range s.failures {
		if i < 5 {
			t.Log("failed: " + fl)
		}
	}
	if !ok {
		t.Logf("NetworkPolicies created twice: %v, never: %v; UpdateRequests twice: %v, none: %v", first(twice, 10), first(missed, 10), first(urTwice, 10), first(urLost, 10))
	}
	reliability.Report(t, reliability.Figure{
		Part: "fault: kube-apiserver restarted under load",
		Figure: fmt.Sprintf("%s down %s; %d reviews at %.0f/s (asked %d/s): %d answered by charter (p99 %s), %d failed, %d refused by the API server (down or starting); charter %s, Leases lost %v and led again: %t; %d Namespaces (%d refused while it was down, created after): %d NetworkPolicies created once, %d twice, %d never, %d UpdateRequests lost, %d duplicated, 0 left; %d ConfigMaps, each reported once%s",
			"kube-apiserver", up.Sub(down).Round(100*time.Millisecond), s.sent, s.rate, rate, s.answered, s.p99, s.failed, s.apiServer,
			map[bool]string{true: "ran throughout", false: "EXITED"}[alive], lost, leads,
			len(nsNames), namespaces.retried, len(nsNames)-len(twice)-len(missed), len(twice), len(missed), len(urLost), len(urTwice), len(cmNames), failureNote(s)),
		Target: "0 failed, charter never exits and leads again; each UpdateRequest done once; reports converge",
		OK:     ok,
	})
}

// reviewPod is a Pod the policy admits (good) or refuses.
func reviewPod(namespace, name string, good bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/app:1.0"}}},
	}
	if good {
		p.Labels = map[string]string{"team": "a"}
	}
	return p
}

// refusedByPolicy is nil when err is charter's refusal of a Pod without
// a team label.
func refusedByPolicy(err error) error {
	if err == nil {
		return fmt.Errorf("admitted")
	}
	if strings.Contains(err.Error(), "denied the request") && strings.Contains(err.Error(), "label team is required") {
		return nil
	}
	return err
}

// reviewLoad sends dry-run Pods to a namespace through the API server,
// open loop, at a fixed rate: each on its own, whatever became of the
// ones before. With a bound on the reviews outstanding, a review due
// while that many are unanswered is not sent but counted (unsent): an
// API server slower than the rate shows as a count, not as a queue
// growing for the whole run.
type reviewLoad struct {
	began          time.Time
	cancel         context.CancelFunc
	wg             sync.WaitGroup
	mu             sync.Mutex
	sent           []review
	done           chan struct{}
	maxOutstanding int64
	outstanding    atomic.Int64
	unsent         atomic.Int64
}

// review is one dry-run request and what became of it.
type review struct {
	start, end time.Time
	good       bool
	err        error
}

// startReviewLoad sends rate reviews a second, with at most
// maxOutstanding unanswered (0: no bound).
func startReviewLoad(ctx context.Context, cl client.Client, namespace string, rate, maxOutstanding int) *reviewLoad {
	ctx, cancel := context.WithCancel(ctx)
	l := &reviewLoad{began: time.Now(), cancel: cancel, done: make(chan struct{}), maxOutstanding: int64(maxOutstanding)}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if l.maxOutstanding > 0 && l.outstanding.Load() >= l.maxOutstanding {
				l.unsent.Add(1)
				continue
			}
			l.outstanding.Add(1)
			l.wg.Go(func() {
				defer l.outstanding.Add(-1)
				r := review{start: time.Now(), good: i%2 == 0}
				r.err = cl.Create(ctx, reviewPod(namespace, fmt.Sprintf("review-%d", i), r.good), client.DryRunAll)
				r.end = time.Now()
				if ctx.Err() != nil {
					return // stopped: not a review
				}
				l.mu.Lock()
				l.sent = append(l.sent, r)
				l.mu.Unlock()
			})
		}
	}()
	return l
}

// stop ends the load; the reviews in flight are dropped.
func (l *reviewLoad) stop() *reviewLoad {
	l.cancel()
	<-l.done
	l.wg.Wait()
	return l
}

type reviewSummary struct {
	sent, answered, failed, apiServer int
	// unsent are the reviews not sent while the bound of outstanding
	// ones was reached.
	unsent int
	// shed are the reviews the API server's priority and fairness
	// refused (429) before any webhook saw them.
	shed     int
	rate     float64
	p99      time.Duration
	failures []string
	// failureKinds counts the failures by their error, numbers and
	// names aside.
	failureKinds map[string]int
}

// summarize sorts the reviews: answered by charter (the good admitted,
// the bad refused by the policy); shed by the API server's priority and
// fairness; failed (a webhook call that failed, a
// wrong verdict, or anything else that went wrong before the API server
// went down at down); refused by the API server itself, down or starting
// (connections refused or reset, its own "not ready").
func (l *reviewLoad) summarize(down time.Time) reviewSummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := reviewSummary{sent: len(l.sent), unsent: int(l.unsent.Load()), failureKinds: map[string]int{}}
	var latencies []time.Duration
	var last time.Time
	for _, r := range l.sent {
		if r.end.After(last) {
			last = r.end
		}
		var verdict error
		if r.good {
			verdict = r.err
		} else {
			verdict = refusedByPolicy(r.err)
		}
		switch {
		case verdict == nil:
			s.answered++
			latencies = append(latencies, r.end.Sub(r.start))
		case apierrors.IsTooManyRequests(r.err) && !strings.Contains(r.err.Error(), "webhook"):
			s.shed++
		case r.err != nil && !r.end.Before(down) && !strings.Contains(r.err.Error(), "failed calling webhook") && !strings.Contains(r.err.Error(), "denied the request"):
			s.apiServer++
		default:
			s.failed++
			s.failures = append(s.failures, fmt.Sprintf("good=%t at %s: %v", r.good, r.start.Format("15:04:05.000"), r.err))
			s.failureKinds[errorKind(r.err)]++
		}
	}
	if elapsed := last.Sub(l.began).Seconds(); elapsed > 0 {
		s.rate = float64(s.sent) / elapsed
	}
	if len(latencies) > 0 {
		slices.Sort(latencies)
		s.p99 = latencies[len(latencies)*99/100].Round(time.Millisecond)
	}
	return s
}

// creator creates one object every interval, each until it exists: a
// creation refused while the API server is away is tried again.
type creator struct {
	client client.Client
	cancel context.CancelFunc
	done   chan struct{}
	names  []string
	// retried counts the objects whose creation was refused at first.
	retried int
}

func keepCreating(ctx context.Context, cl client.Client, every time.Duration, object func(i int) client.Object) *creator {
	ctx, cancel := context.WithCancel(ctx)
	c := &creator{client: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for i := 0; ctx.Err() == nil; i++ {
			obj := object(i)
			for attempt := 0; ; attempt++ {
				err := c.client.Create(ctx, obj)
				if err == nil || apierrors.IsAlreadyExists(err) {
					if attempt > 0 {
						c.retried++
					}
					break
				}
				if ctx.Err() != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			c.names = append(c.names, obj.GetName())
			select {
			case <-ctx.Done():
			case <-time.After(every):
			}
		}
	}()
	return c
}

// stop ends the creations and returns the names of the objects made.
func (c *creator) stop() []string {
	c.cancel()
	<-c.done
	return c.names
}

// updateRequestTriggers counts the UpdateRequests created (the audit
// log's bodies) by the name of their trigger.
func (f *faultCluster) updateRequestTriggers() map[string]int {
	out := map[string]int{}
	for _, ev := range countableCreates(f.audited("updaterequests")) {
		var ur kyvernov2.UpdateRequest
		if err := json.Unmarshal(ev.RequestObject, &ur); err != nil {
			f.t.Fatalf("an audited UpdateRequest: %v", err)
		}
		name := ur.Spec.Resource.Name
		if len(ur.Spec.RuleContext) > 0 {
			name = ur.Spec.RuleContext[0].Trigger.Name
		}
		out[name]++
	}
	return out
}

// countableCreates are the creations that made an object.
func countableCreates(events []auditEvent) []auditEvent {
	var out []auditEvent
	for _, ev := range events {
		if ev.Verb == "create" && ev.ResponseStatus.Code == 201 {
			out = append(out, ev)
		}
	}
	return out
}

var policyReports = schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReportList"}

// reportedOnce counts the objects of names in ns whose PolicyReport (named
// by their UID) holds exactly one result of policy, and says what is
// wrong with the first that does not.
func (f *faultCluster) reportedOnce(ns string, names []string, policy string) (int, string) {
	var cms corev1.ConfigMapList
	if err := f.cl.List(f.ctx, &cms, client.InNamespace(ns)); err != nil {
		return 0, err.Error()
	}
	uid := map[string]string{}
	for _, cm := range cms.Items {
		uid[cm.Name] = string(cm.UID)
	}
	reports := &unstructured.UnstructuredList{}
	reports.SetGroupVersionKind(policyReports)
	if err := f.cl.List(f.ctx, reports, client.InNamespace(ns)); err != nil {
		return 0, err.Error()
	}
	results := map[string]int{}
	for _, r := range reports.Items {
		list, _, _ := unstructured.NestedSlice(r.Object, "results")
		for _, res := range list {
			if m, _ := res.(map[string]any); m["policy"] == policy {
				results[r.GetName()]++
			}
		}
	}
	ok, why := 0, ""
	for _, name := range names {
		if c := results[uid[name]]; c == 1 {
			ok++
		} else if why == "" {
			why = fmt.Sprintf("ConfigMap %s: %d results of %s", name, c, policy)
		}
	}
	return ok, why
}

// errorKind is an error's text with its numbers and review names made
// alike, so that failures group by what went wrong.
func errorKind(err error) string {
	if err == nil {
		return "a wrong verdict (admitted)"
	}
	return digits.ReplaceAllString(err.Error(), "N")
}

var digits = regexp.MustCompile(`[0-9]+`)

// topKinds says the commonest failure kinds, with their counts.
func topKinds(kinds map[string]int, n int) string {
	type kc struct {
		kind  string
		count int
	}
	var all []kc
	for k, c := range kinds {
		all = append(all, kc{k, c})
	}
	slices.SortFunc(all, func(a, b kc) int { return b.count - a.count })
	var out []string
	for i, k := range all {
		if i == n {
			break
		}
		text := k.kind
		if len(text) > 300 {
			text = text[:300] + "…"
		}
		out = append(out, fmt.Sprintf("%d× %s", k.count, text))
	}
	return strings.Join(out, "; ")
}

// failureNote is "; failures: " and the commonest kinds of failure, or ""
// when none failed.
func failureNote(s reviewSummary) string {
	if s.failed == 0 {
		return ""
	}
	return "; failures: " + topKinds(s.failureKinds, 3)
}
