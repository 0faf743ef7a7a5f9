package engine

import (
	"context"
	"testing"

	"github.com/charter-dev/charter/engine/internal/testpods"
	"github.com/charter-dev/charter/engine/review"
)

// TestRuleResponsesFitTheirBound: Validate makes room for the rule
// responses of a request up front from what index counted for its kind.
// Every response fits (the bound holds), and for a Pod through the Pod
// Security set the room is exact: each policy answers a Pod with its own
// rules, never with its autogen rules for Pod controllers.
func TestRuleResponsesFitTheirBound(t *testing.T) {
	set, err := Compile(podSecurityPolicies(t))
	if err != nil {
		t.Fatal(err)
	}
	deployment := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "default"},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
			"spec":     testpods.Pod(0)["spec"],
		}},
	}
	configMap := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "default"}}
	for _, tc := range []struct {
		name   string
		object map[string]any
		exact  bool
	}{
		{"Pod", testpods.Pod(0), true},
		{"Deployment", deployment, false},
		{"ConfigMap", configMap, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, validate := range []func(context.Context, *review.Request, ...EvalOption) *Response{set.Validate, set.ValidateTimed} {
				resp := validate(context.Background(), &review.Request{Object: tc.object})
				n := 0
				for _, p := range resp.Policies {
					n += len(p.Rules)
				}
				bound := set.rulesUpFront(newRequestView(context.Background(), &review.Request{Object: tc.object}, &review.Options{}))
				if n > bound {
					t.Errorf("%d rule responses, room made for %d", n, bound)
				}
				if tc.exact && (n == 0 || n != bound) {
					t.Errorf("%d rule responses, room made for %d: want exactly as many", n, bound)
				}
			}
		})
	}
}
