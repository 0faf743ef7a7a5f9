package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

func TestPolicyChanged(t *testing.T) {
	const header = `
# HELP kyverno_policy_changes_total Policy creations, spec updates and deletions seen.
# TYPE kyverno_policy_changes_total counter
`
	const scoped = `otel_scope_name="kyverno",otel_scope_schema_url="",otel_scope_version=""`
	type change struct {
		policy string
		change string
	}
	tests := []struct {
		name    string
		changes []change
		want    string
	}{
		{
			name:    "an enforcing ClusterPolicy created, updated twice and deleted",
			changes: []change{{"require-labels.yaml", "created"}, {"require-labels.yaml", "updated"}, {"require-labels.yaml", "updated"}, {"require-labels.yaml", "deleted"}},
			want: `
kyverno_policy_changes_total{` + scoped + `,policy_background_mode="true",policy_change_type="created",policy_name="require-labels",policy_namespace="-",policy_type="cluster",policy_validation_mode="enforce"} 1
kyverno_policy_changes_total{` + scoped + `,policy_background_mode="true",policy_change_type="deleted",policy_name="require-labels",policy_namespace="-",policy_type="cluster",policy_validation_mode="enforce"} 1
kyverno_policy_changes_total{` + scoped + `,policy_background_mode="true",policy_change_type="updated",policy_name="require-labels",policy_namespace="-",policy_type="cluster",policy_validation_mode="enforce"} 2
`,
		},
		{
			name:    "a namespaced Policy and an audit ClusterPolicy without background",
			changes: []change{{"default-sa.yaml", "created"}, {"add-labels.yaml", "created"}},
			want: `
kyverno_policy_changes_total{` + scoped + `,policy_background_mode="false",policy_change_type="created",policy_name="add-labels",policy_namespace="-",policy_type="cluster",policy_validation_mode="audit"} 1
kyverno_policy_changes_total{` + scoped + `,policy_background_mode="true",policy_change_type="created",policy_name="default-sa",policy_namespace="team-a",policy_type="namespaced",policy_validation_mode="audit"} 1
`,
		},
		{name: "no change, no series"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			rec, err := New(reg, "test")
			if err != nil {
				t.Fatal(err)
			}
			policies := map[string]kyvernov1.PolicyInterface{}
			for _, c := range tc.changes {
				if policies[c.policy] == nil {
					policies[c.policy] = loadPolicy(t, c.policy)
				}
				rec.PolicyChanged(policies[c.policy], c.change)
			}
			want := ""
			if tc.want != "" {
				want = header + strings.TrimPrefix(tc.want, "\n")
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), PolicyChangesTotal); err != nil {
				t.Error(err)
			}
		})
	}
}
