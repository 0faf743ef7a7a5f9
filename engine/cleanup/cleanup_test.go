package cleanup

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/internal/testcases"
	"github.com/charter-dev/charter/engine/loader"
)

type cleanupCase struct {
	Policy          map[string]any               `json:"policy"`
	APICalls        map[string]any               `json:"apiCalls"`
	NamespaceLabels map[string]map[string]string `json:"namespaceLabels"`
	Objects         []struct {
		Want   string         `json:"want"` // delete, keep or error
		Kind   string         `json:"kind"` // group/version/Kind or version/Kind
		Object map[string]any `json:"object"`
	} `json:"objects"`
}

func decodeCleanupPolicy(t *testing.T, raw map[string]any) kyvernov2.CleanupPolicyInterface {
	t.Helper()
	data, err := yaml.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	var p kyvernov2.CleanupPolicyInterface = &kyvernov2.ClusterCleanupPolicy{}
	if raw["kind"] == kyvernov2.CleanupPolicyKind {
		p = &kyvernov2.CleanupPolicy{}
	}
	if err := yaml.UnmarshalStrict(data, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func parseGVK(s string) schema.GroupVersionKind {
	parts := strings.Split(s, "/")
	if len(parts) == 2 {
		return schema.GroupVersionKind{Version: parts[0], Kind: parts[1]}
	}
	return schema.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]}
}

func TestCleanupTestdata(t *testing.T) {
	testcases.Each(t, "run", func(t *testing.T, tc *cleanupCase) {
		p, err := Compile(decodeCleanupPolicy(t, tc.Policy))
		if err != nil {
			t.Fatalf("compile: %v", err)
		}
		run, err := p.Prepare(context.Background(), loader.Loaders{APICalls: testcases.APIPaths(tc.APICalls)})
		if err != nil {
			t.Fatalf("prepare: %v", err)
		}
		for i, o := range tc.Objects {
			ns, _ := o.Object["metadata"].(map[string]any)["namespace"].(string)
			got, err := run.Selects(Object{Object: o.Object, Kind: parseGVK(o.Kind),
				NamespaceLabels: func() map[string]string { return tc.NamespaceLabels[ns] }})
			verdict := testcases.Deletion(got, err)
			if verdict != o.Want {
				t.Errorf("objects[%d] (%s %s/%v): %s (err %v), want %s", i, o.Kind, ns, o.Object["metadata"].(map[string]any)["name"], verdict, err, o.Want)
			}
		}
	})
}

func TestCleanupPrepareContextError(t *testing.T) {
	p, err := Compile(decodeCleanupPolicy(t, map[string]any{
		"apiVersion": "kyverno.io/v2", "kind": "ClusterCleanupPolicy", "metadata": map[string]any{"name": "x"},
		"spec": map[string]any{"schedule": "* * * * *",
			"context": []any{map[string]any{"name": "gone", "apiCall": map[string]any{"urlPath": "/api/v1/nothing"}}},
			"match":   map[string]any{"any": []any{map[string]any{"resources": map[string]any{"kinds": []any{"Pod"}}}}}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Prepare(context.Background(), loader.Loaders{APICalls: testcases.APIPaths{}}); err == nil || !strings.Contains(err.Error(), `context entry "gone"`) {
		t.Fatalf("Prepare = %v, want the context entry's error", err)
	}
}

func TestCompileCleanupFaults(t *testing.T) {
	data, err := os.ReadFile("testdata/compile/faults.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Policy map[string]any `json:"policy"`
			Want   []string       `json:"want"`
		} `json:"cases"`
	}
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		t.Fatal(err)
	}
	for _, tc := range file.Cases {
		name := tc.Policy["metadata"].(map[string]any)["name"].(string)
		t.Run(name, func(t *testing.T) {
			_, err := Compile(decodeCleanupPolicy(t, tc.Policy))
			if err == nil {
				t.Fatal("compiled, want faults")
			}
			faults, ok := err.(fault.List)
			if !ok || len(faults) != len(tc.Want) {
				t.Fatalf("got %d faults, want %d:\n%v", len(faults), len(tc.Want), err)
			}
			for _, w := range tc.Want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("faults lack %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestCleanupSchedule(t *testing.T) {
	p, err := Compile(&kyvernov2.ClusterCleanupPolicy{Spec: kyvernov2.CleanupPolicySpec{Schedule: "@every 90s",
		MatchResources: kyvernov2.MatchResources{Any: decodeFilters(t, `[{resources: {kinds: [Pod]}}]`)}}})
	if err != nil {
		t.Fatal(err)
	}
	ref := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := p.Schedule().Next(ref); !got.Equal(ref.Add(90 * time.Second)) {
		t.Errorf("next = %v", got)
	}
	if got := p.Kinds(); len(got) != 1 || got[0] != "Pod" {
		t.Errorf("kinds = %v", got)
	}
}

func decodeFilters(t *testing.T, s string) (out kyvernov1.ResourceFilters) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(s), &out); err != nil {
		t.Fatal(err)
	}
	return out
}
