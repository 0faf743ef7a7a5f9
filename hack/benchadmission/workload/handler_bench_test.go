package workload

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/hack/benchadmission/policymix"
	"github.com/charter-dev/charter/webhook/events"
	"github.com/charter-dev/charter/webhook/metrics"
	"github.com/charter-dev/charter/webhook/server"
)

// BenchmarkValidateHandler is the CPU cost of one review on
// /validate/fail, without the network, for the benchmark's mix: the null
// handler (decode and answer only), charter without metrics, and charter
// with metrics as it serves. Both evaluate the policy set in one call over
// one shared view of the request; with metrics the set is also timed
// policy by policy (engine.PolicySet.ValidateTimed) for the duration
// histograms.
func BenchmarkValidateHandler(b *testing.B) {
	policies, err := policymix.EnforcedPolicies(policyDir)
	if err != nil {
		b.Fatal(err)
	}
	typed, err := policymix.Typed(policies)
	if err != nil {
		b.Fatal(err)
	}
	snapshot, err := Snapshot(typed)
	if err != nil {
		b.Fatal(err)
	}
	pods := Pods("bench")
	mix, err := NewMix(pods, 0.5)
	if err != nil {
		b.Fatal(err)
	}
	bodies := map[string][]byte{}
	for _, p := range pods {
		if bodies[p.Pod.Name], err = Review(p.Pod, "uid-"+p.Pod.Name); err != nil {
			b.Fatal(err)
		}
	}
	rec, err := metrics.New(prometheus.NewRegistry(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		opts server.Options
	}{
		{"null", server.Options{Null: true}},
		{"charter", server.Options{Policies: Fixed{snapshot}}},
		{"charter-metrics", server.Options{Policies: Fixed{snapshot}, Metrics: rec}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := server.NewHandler(bc.opts)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, server.PathValidateFail, bytes.NewReader(bodies[mix.At(i).Pod.Name]))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("HTTP %d: %s", w.Code, w.Body)
				}
				i++
			}
		})
	}
}

// BenchmarkValidateHandlerPodSecurityForms is the CPU and allocation cost
// of one review on /validate/fail with the corpus's Pod Security set as
// ClusterPolicies (Enforce) and as ValidatingPolicies (Deny), the pair the
// vpol mode of bench-admission puts under load: bare (the handler alone)
// and served as bench-admission serves it (ServeHandler: filters,
// Prometheus metrics, the audit queue and Kubernetes Events, here written
// to a writer that keeps nothing), each request a Pod of its own name. It
// ends with a table of the two forms' allocations per review side by side:
// at 3,000/s the tail is garbage collection, which scales with them.
func BenchmarkValidateHandlerPodSecurityForms(b *testing.B) {
	corpus := "../../../../shared/conformance/kyverno-policies"
	if _, err := os.Stat(corpus); err != nil {
		b.Skipf("conformance corpus not present: %v", err)
	}
	cpols, vpols, err := PodSecurityPairs(filepath.Join(corpus, "pod-security"), filepath.Join(corpus, "pod-security-vpol"))
	if err != nil {
		b.Fatal(err)
	}
	pods := Pods("bench")
	mix, err := NewMix(pods, 0.5)
	if err != nil {
		b.Fatal(err)
	}
	bodies := map[string]*renamedReview{}
	for _, p := range pods {
		if bodies[p.Pod.Name], err = newRenamedReview(p.Pod); err != nil {
			b.Fatal(err)
		}
	}
	forms := []struct {
		name     string
		policies []kyvernov1.PolicyInterface
	}{{"clusterpolicies", cpols}, {"validatingpolicies", vpols}}
	snapshots := make([]*policycache.Snapshot, len(forms))
	for i, f := range forms {
		if snapshots[i], err = Snapshot(f.policies); err != nil {
			b.Fatal(err)
		}
	}
	measured := map[string]perReview{}
	for _, served := range []string{"bare", "serve"} {
		for i, f := range forms {
			name := served + "/" + f.name
			b.Run(name, func(b *testing.B) {
				h := server.NewHandler(server.Options{Policies: Fixed{snapshots[i]}})
				if served == "serve" {
					rec, err := metrics.New(prometheus.NewRegistry(), "bench")
					if err != nil {
						b.Fatal(err)
					}
					sink := events.NewSink(events.Options{Writer: discardEvents{}, Omit: events.DefaultOmit})
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan struct{})
					go func() { defer close(done); _ = sink.Start(ctx) }()
					defer func() { cancel(); <-done }()
					h = ServeHandler(snapshots[i], rec, sink)
				}
				b.ReportAllocs()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				n := 0
				for b.Loop() {
					body := bodies[mix.At(n).Pod.Name].named(n)
					r := httptest.NewRequest(http.MethodPost, server.PathValidateFail, bytes.NewReader(body))
					r.Header.Set("Content-Type", "application/json")
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != http.StatusOK {
						b.Fatalf("HTTP %d: %s", w.Code, w.Body)
					}
					n++
				}
				runtime.ReadMemStats(&after)
				measured[name] = perReview{objects: float64(after.Mallocs-before.Mallocs) / float64(n), bytes: float64(after.TotalAlloc-before.TotalAlloc) / float64(n)}
			})
		}
	}
	var table strings.Builder
	fmt.Fprintf(&table, "allocated per review%-14s %-24s %-24s %s\n", "", "CLUSTERPOLICIES", "VALIDATINGPOLICIES", "VP / CP")
	for _, served := range []string{"bare", "serve"} {
		cp, vp := measured[served+"/clusterpolicies"], measured[served+"/validatingpolicies"]
		if cp.objects == 0 || vp.objects == 0 {
			continue
		}
		fmt.Fprintf(&table, "  %-32s %-24s %-24s %.2fx objects, %.2fx bytes\n", served, cp, vp, vp.objects/cp.objects, vp.bytes/cp.bytes)
	}
	// Printed, not logged: a parent benchmark's log is not shown.
	fmt.Print(table.String())
}

// perReview is what one review allocated on average.
type perReview struct{ objects, bytes float64 }

func (p perReview) String() string {
	return fmt.Sprintf("%.0f objects, %.1f KiB", p.objects, p.bytes/1024)
}

// discardEvents is an events writer that keeps nothing.
type discardEvents struct{}

func (discardEvents) Create(context.Context, *eventsv1.Event) error { return nil }

// renamedReview is the AdmissionReview of a Pod whose name ends in eight
// digits that named overwrites in place, so that every request carries a
// Pod of its own name, as the API server's requests for Pods created one
// after another do (events about distinct Pods are distinct events),
// without allocating a body per request.
type renamedReview struct {
	body   []byte
	digits []int // offsets of the name's digits in body
}

const renamedDigits = 8

func newRenamedReview(p *corev1.Pod) (*renamedReview, error) {
	p = p.DeepCopy()
	suffix := "-" + strings.Repeat("0", renamedDigits)
	p.Name += suffix
	body, err := Review(p, "uid-"+p.Name)
	if err != nil {
		return nil, err
	}
	rv := &renamedReview{body: body}
	quoted := []byte(p.Name + `"`)
	for at := 0; ; {
		j := bytes.Index(body[at:], quoted)
		if j < 0 {
			break
		}
		rv.digits = append(rv.digits, at+j+len(p.Name)-renamedDigits)
		at += j + len(quoted)
	}
	if len(rv.digits) == 0 {
		return nil, fmt.Errorf("pod %s: name not found in its review", p.Name)
	}
	return rv, nil
}

// named returns the body with the Pod's name ending in i (modulo 10^8).
// The body is shared: it is valid until the next call.
func (rv *renamedReview) named(i int) []byte {
	for _, at := range rv.digits {
		v := i
		for d := renamedDigits - 1; d >= 0; d-- {
			rv.body[at+d] = byte('0' + v%10)
			v /= 10
		}
	}
	return rv.body
}
