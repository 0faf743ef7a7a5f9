package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/kustomize/api/krusty"
	kustomizetypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/hack/benchadmission/workload"
	"github.com/charter-dev/charter/webhook/events"
	"github.com/charter-dev/charter/webhook/metrics"
	"github.com/charter-dev/charter/webhook/server"
)

// BenchmarkStagingReview is the CPU and allocation cost of one review as
// make bench-admission MODE=split sends it to charter's admission
// process: environments/staging's ClusterPolicies, namespace bench
// labelled charter.dev/enforcement=enforce (the staged restricted set
// enforces, the rest audits), half the Pods non-compliant, each review a
// Pod of its own name and uid, on /validate/fail of a handler served as
// charter serve serves it (resource filters, metrics, the audit queue, the
// Events sink writing to nothing). "bare" is the handler over a recorder;
// "tls" adds the transport: HTTP/1.1 keep-alive over TLS on loopback, the
// client's work included. Run it with -cpu 1 so that what the sink and
// the audit queue do in the background is counted in ns/op.
func BenchmarkStagingReview(b *testing.B) {
	policies := stagingPolicies(b)
	snapshot, err := workload.Snapshot(policies)
	if err != nil {
		b.Fatal(err)
	}
	pods := workload.Pods("bench")
	mix, err := workload.NewMix(pods, 0.5)
	if err != nil {
		b.Fatal(err)
	}
	// Distinct names and uids, as the bench sends them (events about
	// distinct Pods are distinct events); enough that the cycle does not
	// show in the sink's per-object filter.
	const distinct = 4096
	bodies := make([][]byte, distinct)
	for i := range bodies {
		p := mix.At(i).Pod.DeepCopy()
		p.Name += "-" + strconv.Itoa(i)
		p.UID = types.UID("bench-object-" + strconv.Itoa(i))
		if bodies[i], err = workload.Review(p, "uid-"+p.Name); err != nil {
			b.Fatal(err)
		}
	}
	// Served as charter serve serves it, events written to nothing.
	handler := func(b *testing.B) http.Handler {
		rec, err := metrics.New(prometheus.NewRegistry(), "bench")
		if err != nil {
			b.Fatal(err)
		}
		sink := events.NewSink(events.Options{Writer: noEvents{}, Omit: events.DefaultOmit})
		ctx, stop := context.WithCancel(context.Background())
		var running sync.WaitGroup
		running.Go(func() { _ = sink.Start(ctx) })
		b.Cleanup(func() {
			stop()
			running.Wait()
		})
		return workload.ServeHandler(snapshot, rec, sink, func(o *server.Options) {
			o.Loaders = loader.Loaders{Namespaces: enforcedNamespaces{}}
		})
	}
	b.Run("bare", func(b *testing.B) {
		h := handler(b)
		// The staged restricted set must enforce: some reviews denied,
		// some allowed.
		denied := 0
		for i := range 32 {
			if bytes.Contains(serveReview(b, h, bodies[i]), []byte(`"allowed":false`)) {
				denied++
			}
		}
		if denied == 0 || denied == 32 {
			b.Fatalf("%d of 32 reviews denied: the staged restricted set does not enforce as in the bench", denied)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			serveReview(b, h, bodies[i%distinct])
		}
	})
	b.Run("tls", func(b *testing.B) {
		srv := httptest.NewUnstartedServer(handler(b))
		srv.EnableHTTP2 = false
		srv.StartTLS()
		defer srv.Close()
		client := srv.Client()
		url := srv.URL + server.PathValidateFail + "?timeout=10s"
		var resp bytes.Buffer
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r, err := client.Post(url, "application/json", bytes.NewReader(bodies[i%distinct]))
			if err != nil {
				b.Fatal(err)
			}
			resp.Reset()
			_, err = resp.ReadFrom(r.Body)
			r.Body.Close()
			if err != nil || r.StatusCode != http.StatusOK {
				b.Fatalf("HTTP %d: %v %s", r.StatusCode, err, resp.Bytes())
			}
		}
	})
}

// serveReview answers body on /validate/fail as the API server asks
// (?timeout=10s) and returns the answer, which must be a 200.
func serveReview(b *testing.B, h http.Handler, body []byte) []byte {
	req := httptest.NewRequest(http.MethodPost, server.PathValidateFail+"?timeout=10s", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

// stagingPolicies builds environments/staging as the split bench applies
// it.
func stagingPolicies(b *testing.B) []kyvernov1.PolicyInterface {
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = kustomizetypes.LoadRestrictionsNone
	dir, err := filepath.Abs(filepath.Join("..", "..", "environments", "staging"))
	if err != nil {
		b.Fatal(err)
	}
	resources, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		b.Fatal(err)
	}
	var out []kyvernov1.PolicyInterface
	for _, r := range resources.Resources() {
		raw, err := r.MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		p := &kyvernov1.ClusterPolicy{}
		if err := json.Unmarshal(raw, p); err != nil {
			b.Fatal(err)
		}
		if p.Kind != "ClusterPolicy" {
			b.Fatalf("%s %s in environments/staging: only ClusterPolicies expected", p.Kind, p.Name)
		}
		out = append(out, p)
	}
	return out
}

// enforcedNamespaces labels every namespace for enforcement, as the bench
// labels namespace bench; like the informer's (policycache.Cache), the
// labels are shared, not copied per review.
type enforcedNamespaces struct{}

var enforcedLabels = map[string]string{"charter.dev/enforcement": "enforce", "kubernetes.io/metadata.name": "bench"}

func (enforcedNamespaces) NamespaceLabels(context.Context, string) (map[string]string, error) {
	return enforcedLabels, nil
}

// noEvents is an events writer that keeps nothing.
type noEvents struct{}

func (noEvents) Create(context.Context, *eventsv1.Event) error { return nil }
