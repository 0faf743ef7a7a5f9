package admission

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/clusterstate/policycache"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/webhook/metrics"
	"github.com/charter-dev/charter/webhook/server"
)

// loadPolicies reads the ClusterPolicies and Policies of a multi-document
// YAML file.
func loadPolicies(t testing.TB, path string) []kyvernov1.PolicyInterface {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []kyvernov1.PolicyInterface
	for i, doc := range strings.Split(string(data), "\n---\n") {
		var probe struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &probe); err != nil {
			t.Fatalf("%s, document %d: %v", path, i, err)
		}
		var p kyvernov1.PolicyInterface = &kyvernov1.ClusterPolicy{}
		if probe.Kind == kyvernov1.PolicyKind {
			p = &kyvernov1.Policy{}
		}
		if err := yaml.UnmarshalStrict([]byte(doc), p); err != nil {
			t.Fatalf("%s, document %d: %v", path, i, err)
		}
		out = append(out, p)
	}
	return out
}

func podRequest(namespace string, labels map[string]any, dryRun bool) *engine.Request {
	obj := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "web", "namespace": namespace, "labels": labels},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx:1.27"}}},
	}
	return &engine.Request{Operation: kyvernov1.Create, Object: obj, Kind: schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Namespace: namespace, Name: "web", DryRun: dryRun}
}

// The metered mutator answers every request exactly as the server's
// EngineMutator does, under both failure policies, and records one
// kyverno_policy_results_total sample per rule that responded.
func TestMeteredMutatorAnswersAsEngineMutator(t *testing.T) {
	snapshot, _ := policycache.NewBuilder().Build(loadPolicies(t, "testdata/mutate/policies.yaml"), nil)
	if len(snapshot.Errors) > 0 {
		t.Fatalf("test policies do not compile: %v", snapshot.Errors)
	}
	tests := []struct {
		name string
		req  *engine.Request
		// Per set, Fail then Ignore: the number of rule results recorded,
		// whether the answer patches, how many warnings it carries and
		// whether it denies. These only pin the cases down; the answers
		// themselves are compared with EngineMutator's.
		wantResults  [2]int
		wantPatch    [2]bool
		wantWarnings [2]int
		wantDenied   [2]bool
	}{
		{name: "a label added, a rule skipped by its preconditions", req: podRequest("default", nil, false),
			wantResults: [2]int{2, 0}, wantPatch: [2]bool{true, false}},
		{name: "a label already there", req: podRequest("default", map[string]any{"team": "web"}, false),
			wantResults: [2]int{2, 0}},
		{name: "emitWarning warns on the applied rule", req: podRequest("team-a", map[string]any{"owner": "alice"}, false),
			wantResults: [2]int{3, 0}, wantPatch: [2]bool{true, false}, wantWarnings: [2]int{1, 0}},
		{name: "erroring rules under Fail and Ignore", req: podRequest("broken", nil, false),
			wantResults: [2]int{3, 1}, wantWarnings: [2]int{0, 1}, wantDenied: [2]bool{true, false}},
		{name: "a dry run", req: podRequest("default", nil, true),
			wantResults: [2]int{2, 0}, wantPatch: [2]bool{true, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i, set := range []struct {
				set        *engine.PolicySet
				failClosed bool
			}{{snapshot.Fail, true}, {snapshot.Ignore, false}} {
				reg := prometheus.NewRegistry()
				rec, err := metrics.New(reg, "test")
				if err != nil {
					t.Fatal(err)
				}
				got, gotErr := meteredMutator(loader.Loaders{}, rec).Mutate(t.Context(), set.set, tc.req, set.failClosed)
				want, wantErr := server.EngineMutator{}.Mutate(t.Context(), set.set, tc.req, set.failClosed)
				if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotErr, wantErr) {
					t.Errorf("failClosed=%v: metered mutator answered\n  %+v, %v\nEngineMutator\n  %+v, %v", set.failClosed, got, gotErr, want, wantErr)
				}
				if (len(got.Patch) > 0) != tc.wantPatch[i] || len(got.Warnings) != tc.wantWarnings[i] || (got.Denial != "") != tc.wantDenied[i] {
					t.Errorf("failClosed=%v: answer %+v, want patch %v, %d warnings, denied %v",
						set.failClosed, got, tc.wantPatch[i], tc.wantWarnings[i], tc.wantDenied[i])
				}
				if n := resultsRecorded(t, reg); n != tc.wantResults[i] {
					t.Errorf("failClosed=%v: %d rule results recorded, want %d", set.failClosed, n, tc.wantResults[i])
				}
			}
		})
	}
}

// resultsRecorded sums kyverno_policy_results_total over its series.
func resultsRecorded(t *testing.T, reg prometheus.Gatherer) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != metrics.PolicyResultsTotal {
			continue
		}
		for _, m := range f.GetMetric() {
			total += m.GetCounter().GetValue()
		}
	}
	return int(total)
}

func TestMutationRequestLabels(t *testing.T) {
	scale := &engine.Request{Operation: kyvernov1.Update, Kind: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		SubResource: "scale", Namespace: "prod", Object: map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale"}}
	tests := []struct {
		name string
		req  *engine.Request
		want metrics.Request
	}{
		{"a Pod", podRequest("default", nil, false),
			metrics.Request{Kind: "Pod", Namespace: "default", Operation: "CREATE", Webhook: metrics.Mutating}},
		{"a dry run", podRequest("default", nil, true),
			metrics.Request{Kind: "Pod", Namespace: "default", Operation: "CREATE", Webhook: metrics.Mutating, DryRun: true}},
		{"a subresource is labelled with its own kind", scale,
			metrics.Request{Kind: "Scale", Namespace: "prod", Operation: "UPDATE", Webhook: metrics.Mutating}},
		{"no operation means CREATE, no object the request's kind", &engine.Request{Kind: schema.GroupVersionKind{Kind: "ConfigMap"}},
			metrics.Request{Kind: "ConfigMap", Operation: "CREATE", Webhook: metrics.Mutating}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := mutationRequest(tc.req); got != tc.want {
				t.Errorf("mutationRequest = %+v, want %+v", got, tc.want)
			}
		})
	}
}
