package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/charter-dev/charter/engine"
)

func TestObserveScan(t *testing.T) {
	requireLabels := loadPolicy(t, "require-labels.yaml")
	defaultSA := loadPolicy(t, "default-sa.yaml")
	validate := func(name string, status engine.RuleStatus) engine.RuleResponse {
		return engine.RuleResponse{Name: name, Type: engine.TypeValidation, Status: status, Action: engine.Audit}
	}
	const scoped = `otel_scope_name="kyverno",otel_scope_schema_url="",otel_scope_version=""`
	// Background results are a create that is not a dry run, whatever the
	// resource went through (admission-reports.md §4).
	const requireLabelsPod = `{dry_run="false",` + scoped + `,policy_background_mode="true",policy_name="require-labels",policy_namespace="-",policy_type="cluster",policy_validation_mode="enforce",resource_kind="Pod",resource_namespace="team-a",resource_request_operation="create",rule_execution_cause="background_scan",`

	tests := []struct {
		name string
		resp *engine.Response
		// results is the exposition of kyverno_policy_results_total,
		// without its header.
		results         string
		executionLines  []string
		executionSeries int
	}{
		{
			name: "one sample per rule, the policy's time shared among its rules",
			resp: &engine.Response{Resource: engine.ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: "team-a", Name: "web"},
				Policies: []engine.PolicyResponse{
					{Policy: requireLabels, Key: "require-labels", Duration: 40 * time.Millisecond,
						Rules: []engine.RuleResponse{validate("check", engine.StatusFail), validate("check-team", engine.StatusPass)}},
					{Policy: defaultSA, Key: "team-a/default-sa", Duration: 10 * time.Millisecond,
						Rules: []engine.RuleResponse{validate("set-sa", engine.StatusSkip)}},
				}},
			results: `
kyverno_policy_results_total` + requireLabelsPod + `rule_name="check",rule_result="fail",rule_type="validate"} 1
kyverno_policy_results_total` + requireLabelsPod + `rule_name="check-team",rule_result="pass",rule_type="validate"} 1
kyverno_policy_results_total{dry_run="false",` + scoped + `,policy_background_mode="true",policy_name="default-sa",policy_namespace="team-a",policy_type="namespaced",policy_validation_mode="audit",resource_kind="Pod",resource_namespace="team-a",resource_request_operation="create",rule_execution_cause="background_scan",rule_name="set-sa",rule_result="skip",rule_type="validate"} 1
`,
			executionLines: []string{
				`kyverno_policy_execution_duration_seconds_sum` + requireLabelsPod + `rule_name="check",rule_result="fail",rule_type="validate"} 0.02`,
				`kyverno_policy_execution_duration_seconds_count` + requireLabelsPod + `rule_name="check-team",rule_result="pass",rule_type="validate"} 1`,
			},
			executionSeries: 3,
		},
		{
			name: "a cluster-scoped resource has an empty namespace label",
			resp: &engine.Response{Resource: engine.ResourceRef{APIVersion: "v1", Kind: "Namespace", Name: "team-a"},
				Policies: []engine.PolicyResponse{
					{Policy: requireLabels, Key: "require-labels", Duration: time.Millisecond, Rules: []engine.RuleResponse{validate("check", engine.StatusError)}},
				}},
			results: `
kyverno_policy_results_total{dry_run="false",` + scoped + `,policy_background_mode="true",policy_name="require-labels",policy_namespace="-",policy_type="cluster",policy_validation_mode="enforce",resource_kind="Namespace",resource_namespace="",resource_request_operation="create",rule_execution_cause="background_scan",rule_name="check",rule_result="error",rule_type="validate"} 1
`,
			executionSeries: 1,
		},
		{
			// ValidateTimed leaves out policies without rule responses;
			// one handed over anyway must not divide by zero.
			name: "a policy without rule responses: nothing recorded",
			resp: &engine.Response{Resource: engine.ResourceRef{Kind: "Pod", Namespace: "team-a"},
				Policies: []engine.PolicyResponse{{Policy: requireLabels, Key: "require-labels", Duration: time.Millisecond}}},
		},
		{
			name: "nil response: nothing recorded",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			rec, err := New(reg, "test")
			if err != nil {
				t.Fatal(err)
			}
			rec.ObserveScan(tc.resp)
			checkRecorded(t, reg, rec, tc.results, tc.executionSeries, tc.executionLines)
		})
	}
}

// A rule's admission and background results are separate series, though
// every other label agrees: dashboards tell the two causes apart.
func TestScanAndAdmissionSeriesApart(t *testing.T) {
	p := loadPolicy(t, "require-labels.yaml")
	rec, err := New(prometheus.NewRegistry(), "test")
	if err != nil {
		t.Fatal(err)
	}
	rules := []engine.RuleResponse{{Name: "check", Type: engine.TypeValidation, Status: engine.StatusFail, Action: engine.Enforce}}
	rec.ObservePolicy(Request{Kind: "Pod", Namespace: "default", Operation: "CREATE", Webhook: Validating},
		engine.PolicyResponse{Policy: p, Key: "require-labels", Rules: rules}, time.Millisecond)
	scan := &engine.Response{Resource: engine.ResourceRef{Kind: "Pod", Namespace: "default"},
		Policies: []engine.PolicyResponse{{Policy: p, Key: "require-labels", Rules: rules, Duration: time.Millisecond}}}
	rec.ObserveScan(scan)
	rec.ObserveScan(scan)
	for cause, want := range map[string]float64{CauseAdmission: 1, CauseBackground: 2} {
		got := testutil.ToFloat64(rec.results.WithLabelValues("enforce", "cluster", "true", "-", "require-labels",
			"Pod", "default", "create", "check", "fail", "validate", cause, "false"))
		if got != want {
			t.Errorf("kyverno_policy_results_total{rule_execution_cause=%q} = %v, want %v", cause, got, want)
		}
	}
}
