package reports

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/reconciler/reports/report"
)

// holdPodInformer holds the controller's metadata-only LIST (or watch
// list) of every Pod, the Pod informer's first request, until release is
// closed: the informer stays unsynced while everything else runs.
type holdPodInformer struct {
	next    http.RoundTripper
	release chan struct{}
	held    atomic.Bool
}

func (h *holdPodInformer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/api/v1/pods" && strings.Contains(req.Header.Get("Accept"), "PartialObjectMetadata") {
		h.held.Store(true)
		select {
		case <-h.release:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return h.next.RoundTrip(req)
}

func (e *env) createPod(namespace, name string) *corev1.Pod {
	e.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
	}
	var out *corev1.Pod
	// A Pod just deleted may still be on its way out.
	e.eventually("creating Pod "+name, func() error {
		var err error
		out, err = e.cs.CoreV1().Pods(namespace).Create(e.ctx, pod, metav1.CreateOptions{})
		return err
	})
	return out
}

func (e *env) deletePod(namespace, name string) {
	e.t.Helper()
	if err := e.cs.CoreV1().Pods(namespace).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// reportExists reads whether the resource's report exists, and what it
// holds.
func (e *env) reportExists(namespace string, uid types.UID) (bool, []string) {
	e.t.Helper()
	got, u, err := e.results(namespace, string(uid))
	if err != nil {
		e.t.Fatal(err)
	}
	return u != nil, got
}

func (e *env) wantNoReport(what, namespace string, uid types.UID) {
	e.t.Helper()
	e.eventually(what, func() error {
		if ok, got := e.reportExists(namespace, uid); ok {
			return fmt.Errorf("report %s still there with %v", uid, got)
		}
		return nil
	})
}

// TestReportsOfGoneResources: on a control plane without a garbage
// collector (as charter's local one), the report of a resource deleted
// while no controller watched it goes at the controller's first scan and
// at every full rescan, and a report of a resource that exists is kept
// while the resource's informer has not synced.
func TestReportsOfGoneResources(t *testing.T) {
	e := startEnv(t)
	const ns = "gone-test"
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.apply("require-team.yaml")
	kept, deleted, recreated := e.createPod(ns, "kept"), e.createPod(ns, "deleted"), e.createPod(ns, "recreated")
	_, stop := e.startController(Options{})
	for _, pod := range []*corev1.Pod{kept, deleted, recreated} {
		e.wantResults("the report of Pod "+pod.Name, ns, string(pod.UID), "require-team/team-label=fail")
	}
	stop()

	// While no controller runs: one Pod goes, one is deleted and created
	// again under the same name (a new UID).
	e.deletePod(ns, "deleted")
	e.deletePod(ns, "recreated")
	again := e.createPod(ns, "recreated")
	if again.UID == recreated.UID {
		t.Fatal("the recreated Pod kept its UID")
	}

	hold := &holdPodInformer{release: make(chan struct{})}
	e.wrap = func(rt http.RoundTripper) http.RoundTripper { hold.next = rt; return hold }
	const grace = 3 * time.Second
	c, _ := e.runController(Options{GoneGracePeriod: grace})

	t.Run("nothing is deleted while the Pod informer has not synced", func(t *testing.T) {
		select {
		case <-c.firstSwept:
		case <-e.ctx.Done():
			t.Fatal("the first sweep did not end")
		}
		e.eventually("the Pod informer's list held", func() error {
			if !hold.held.Load() {
				return fmt.Errorf("not listed yet")
			}
			return nil
		})
		// A full rescan sweeps every report while the informer knows no
		// Pod at all: an answer from its (empty) cache would delete all.
		if err := c.FullRescan(e.ctx); err != nil {
			t.Fatal(err)
		}
		if c.Synced() {
			t.Fatal("the controller synced with the Pod informer held")
		}
		for _, pod := range []*corev1.Pod{kept, deleted, recreated} {
			if ok, _ := e.reportExists(ns, pod.UID); !ok {
				t.Errorf("the report of Pod %s (%s) was deleted before the Pod informer synced", pod.Name, pod.UID)
			}
		}
	})
	close(hold.release)
	e.eventually("the controller's first scan", func() error {
		if !c.Synced() {
			return fmt.Errorf("not synced")
		}
		return nil
	})

	t.Run("the first scan deletes the reports of Pods deleted meanwhile", func(t *testing.T) {
		e.wantNoReport("the deleted Pod's report", ns, deleted.UID)
		e.wantNoReport("the recreated Pod's old report", ns, recreated.UID)
		// The recreated Pod has a report of its own, written afresh, and
		// the Pod that stayed keeps its report.
		e.wantResults("the recreated Pod's new report", ns, string(again.UID), "require-team/team-label=fail")
		if ok, got := e.reportExists(ns, kept.UID); !ok || strings.Join(got, " ") != "require-team/team-label=fail" {
			t.Errorf("the kept Pod's report: exists %v, results %v", ok, got)
		}
	})

	t.Run("a full rescan deletes reports whose resource went without an event", func(t *testing.T) {
		// Reports as an admission writer leaves them for Pods deleted
		// before any informer saw them: one of a Pod that never existed
		// here, one of an earlier Pod named like one that exists.
		_, keptReport, err := e.results(ns, string(kept.UID))
		if err != nil || keptReport == nil {
			t.Fatalf("the kept Pod's report: %v", err)
		}
		parsed, err := report.Parse(keptReport)
		if err != nil {
			t.Fatal(err)
		}
		ghosts := []report.Scope{
			{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: "ghost", UID: "5a3c1f9e-0000-4000-8000-000000000001"},
			{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: "kept", UID: "5a3c1f9e-0000-4000-8000-000000000002"},
		}
		created := time.Now()
		for _, g := range ghosts {
			if _, err := e.dyn.Resource(policyreport.WGPolicyK8s.Resource(false)).Namespace(ns).Create(e.ctx, report.Object(policyreport.WGPolicyK8s, "", g, parsed.Results), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// The sweep lists reports from the API server's watch cache, which
		// may lag a create by a moment on a busy machine; a report not yet
		// in it is the next rescan's. Wait until the cache holds both, so
		// that this rescan is the one that meets them.
		e.eventually("the ghosts' reports in the API server's watch cache", func() error {
			list, err := e.dyn.Resource(policyreport.WGPolicyK8s.Resource(false)).Namespace(ns).List(e.ctx, metav1.ListOptions{ResourceVersion: anyCachedVersion})
			if err != nil {
				return err
			}
			for _, g := range ghosts {
				if !slices.ContainsFunc(list.Items, func(u unstructured.Unstructured) bool { return u.GetName() == string(g.UID) }) {
					return fmt.Errorf("the report of %s is not listed yet", g)
				}
			}
			return nil
		})
		if err := c.FullRescan(e.ctx); err != nil {
			t.Fatal(err)
		}
		// Younger than the grace period, they may be the reports of
		// CREATEs the API server has not stored yet: they wait for it.
		if time.Since(created) < grace-time.Second {
			for _, g := range ghosts {
				if ok, _ := e.reportExists(ns, g.UID); !ok {
					t.Errorf("the report of %s was deleted within the grace period", g)
				}
			}
		} else {
			t.Log("the full rescan outlasted the grace period; its wait is not exercised")
		}
		for _, g := range ghosts {
			e.wantNoReport("the report of "+g.String(), ns, g.UID)
		}
		for _, pod := range []*corev1.Pod{kept, again} {
			if ok, _ := e.reportExists(ns, pod.UID); !ok {
				t.Errorf("the report of Pod %s, which exists, was deleted", pod.Name)
			}
		}
	})
}
