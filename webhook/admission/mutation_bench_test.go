package admission

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/webhook/metrics"
	"github.com/charter-dev/charter/webhook/server"
)

// BenchmarkMutator compares the server's EngineMutator with the metered
// one admission installs when metrics are on: the difference is what
// recording kyverno_policy_results_total and
// kyverno_policy_execution_duration_seconds for mutate rules costs.
func BenchmarkMutator(b *testing.B) {
	snapshot, _ := policycache.NewBuilder().Build(loadPolicies(b, "testdata/mutate/policies.yaml"), nil)
	rec, err := metrics.New(prometheus.NewRegistry(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	req := podRequest("team-a", map[string]any{"owner": "alice"}, false)
	for _, m := range []struct {
		name    string
		mutator server.Mutator
	}{
		{"engine", server.EngineMutator{}},
		{"metered", meteredMutator(loader.Loaders{}, rec)},
	} {
		b.Run(m.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.mutator.Mutate(b.Context(), snapshot.Fail, req, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
