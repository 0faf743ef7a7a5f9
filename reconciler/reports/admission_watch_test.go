package reports

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/charter-dev/charter/api/policyreport"
)

// getCounter counts the GETs a client sends by URL path (lists and
// watches included, under their collection's path), and refuses with 403
// the paths of refuse, as RBAC without list and watch would.
type getCounter struct {
	next   http.RoundTripper
	refuse map[string]bool

	mu   sync.Mutex
	gets map[string]int
}

func (g *getCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		g.mu.Lock()
		g.gets[req.URL.Path]++
		g.mu.Unlock()
		if g.refuse[req.URL.Path] {
			body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"%s is forbidden in this test"}`, req.URL.Path)
			return &http.Response{
				StatusCode: http.StatusForbidden, Status: "403 Forbidden", Request: req,
				Header: http.Header{"Content-Type": []string{"application/json"}},
				Body:   io.NopCloser(strings.NewReader(body)),
			}, nil
		}
	}
	return g.next.RoundTrip(req)
}

func (g *getCounter) count(path string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gets[path]
}

// TestAdmissionWriterWatchesForTheObject: the admission writer learns
// whether a resource is stored from a watch of its kind, not from a GET
// per resource and attempt. A stored Pod's result lands in its report
// and a never-stored Pod's results wait, looked up again and again,
// without a GET of either Pod or of the waiting one's report. Where the
// kind's list is refused, the writer reads each object's metadata as it
// did without the watch, and the stored Pod's result still lands.
func TestAdmissionWriterWatchesForTheObject(t *testing.T) {
	e := startEnv(t)
	pod, responses := e.latestPodAdmitted()
	const (
		podList = "/api/v1/pods"
		webGet  = "/api/v1/namespaces/reports-test/pods/web"
	)
	ghostGet := "/api/v1/namespaces/reports-test/pods/ghost"

	for _, tc := range []struct {
		name string
		// listRefused refuses the Pod list, as RBAC with get alone does.
		listRefused bool
	}{
		{name: "watched"},
		{name: "list refused", listRefused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ghostUID := types.UID("never-stored-" + strings.ReplaceAll(tc.name, " ", "-"))
			ghostReport := "/apis/wgpolicyk8s.io/v1alpha2/namespaces/reports-test/policyreports/" + string(ghostUID)
			// Each case writes web's report afresh.
			err := e.dyn.Resource(policyreport.WGPolicyK8s.Resource(false)).Namespace("reports-test").Delete(e.ctx, string(pod.GetUID()), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			gets := &getCounter{gets: map[string]int{}, refuse: map[string]bool{podList: tc.listRefused}}
			cfg := rest.CopyConfig(e.cfg)
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { gets.next = rt; return gets })
			mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: e.scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
			if err != nil {
				t.Fatal(err)
			}
			queue := NewAdmissionQueue(10)
			w, err := NewAdmissionWriter(cfg, withLogger(mgr, e.withClusterState(mgr, Options{Admission: queue})))
			if err != nil {
				t.Fatal(err)
			}
			if err := mgr.Add(w); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(e.ctx)
			done := make(chan error, 1)
			go func() { done <- mgr.Start(ctx) }()
			defer func() { cancel(); <-done }()

			ghost := Resource{APIVersion: "v1", Kind: "Pod", Namespace: "reports-test", Name: "ghost", UID: ghostUID}
			web := Resource{APIVersion: "v1", Kind: "Pod", Namespace: "reports-test", Name: "web", UID: pod.GetUID()}
			if !queue.Enqueue(ghost, responses) || !queue.Enqueue(web, responses) {
				t.Fatal("a queue of 10 refused")
			}
			e.wantResults("web's admission result", "reports-test", string(pod.GetUID()), "disallow-latest/no-latest=fail")
			if tc.listRefused {
				if gets.count(webGet) == 0 {
					t.Errorf("no GET of %s: with the list refused the writer must read the object", webGet)
				}
				if w.watches.answered.Load() != 0 {
					t.Errorf("the refused watch answered %d look-ups", w.watches.answered.Load())
				}
				return
			}
			// web's look-up is one answer; the ghost's first two retries
			// (after 2 s and 4 s) two more at least.
			e.eventually("the ghost looked up again in the watch", func() error {
				if n := w.watches.answered.Load(); n < 3 {
					return fmt.Errorf("%d look-ups answered by the watch", n)
				}
				return nil
			})
			if gets.count(podList) == 0 {
				t.Errorf("no list of %s: the writer did not watch Pods", podList)
			}
			for _, path := range []string{webGet, ghostGet, ghostReport} {
				if n := gets.count(path); n != 0 {
					t.Errorf("%d GETs of %s, want none: the watch answers", n, path)
				}
			}
		})
	}
}
