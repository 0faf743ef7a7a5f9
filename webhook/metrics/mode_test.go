package metrics

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/charter-dev/charter/api/charter"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/enginetest"
)

// policy_validation_mode counts the action taken: a staged Audit policy
// denies in a namespace labelled enforce, and is counted "enforce" there
// and "audit" elsewhere.
func TestValidationModeIsTheActionTaken(t *testing.T) {
	set := enginetest.Set(t, loadPolicy(t, "staged-require-team.yaml"))
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "web", "namespace": "prod"}}
	tests := []struct {
		name     string
		labels   map[string]string
		wantMode string
		blocks   bool
	}{
		{"namespace labelled enforce", map[string]string{charter.EnforcementLabel: charter.EnforcementEnforce}, "enforce", true},
		{"namespace not labelled", nil, "audit", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := New(prometheus.NewRegistry(), "test")
			if err != nil {
				t.Fatal(err)
			}
			resp := set.Validate(context.Background(), &engine.Request{Object: pod, NamespaceLabels: tc.labels})
			if got := resp.Blocked(); got != tc.blocks {
				t.Fatalf("blocked = %v, want %v", got, tc.blocks)
			}
			rec.ObserveResults(Request{Kind: "Pod", Namespace: "prod", Operation: "CREATE", Webhook: Validating}, resp)
			for _, mode := range []string{"enforce", "audit"} {
				want := 0.0
				if mode == tc.wantMode {
					want = 1
				}
				if n := testutil.ToFloat64(rec.results.WithLabelValues(mode, "cluster", "true", "-", "staged-require-team",
					"Pod", "prod", "create", "check-team", "fail", "validate", "admission_request", "false")); n != want {
					t.Errorf("results with policy_validation_mode=%q: %v, want %v", mode, n, want)
				}
			}
		})
	}
}
