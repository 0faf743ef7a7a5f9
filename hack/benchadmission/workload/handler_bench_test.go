package workload

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
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
	policies, err := EnforcedPolicies(policyDir)
	if err != nil {
		b.Fatal(err)
	}
	typed, err := Typed(policies)
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
// vpol mode of bench-admission puts under load.
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
	bodies := map[string][]byte{}
	for _, p := range pods {
		if bodies[p.Pod.Name], err = Review(p.Pod, "uid-"+p.Pod.Name); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name     string
		policies []kyvernov1.PolicyInterface
	}{{"clusterpolicies", cpols}, {"validatingpolicies", vpols}} {
		snapshot, err := Snapshot(bc.policies)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			h := server.NewHandler(server.Options{Policies: Fixed{snapshot}})
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
