package metrics

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
)

// loadPolicy reads a ClusterPolicy or Policy from testdata.
func loadPolicy(t *testing.T, name string) kyvernov1.PolicyInterface {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct{ Kind string }
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var p kyvernov1.PolicyInterface
	switch meta.Kind {
	case "ClusterPolicy":
		p = &kyvernov1.ClusterPolicy{}
	case "Policy":
		p = &kyvernov1.Policy{}
	case policiesv1.NamespacedValidatingPolicyKind:
		p = &policiesv1.NamespacedValidatingPolicy{}
	case policiesv1.GeneratingPolicyKind:
		p = &policiesv1.GeneratingPolicy{}
	default:
		t.Fatalf("%s: kind %q is not a policy", name, meta.Kind)
	}
	if err := yaml.UnmarshalStrict(data, p); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

func mutateRule(name string, status engine.RuleStatus) engine.RuleResponse {
	return engine.RuleResponse{Name: name, Type: engine.TypeMutation, Status: status}
}

// resultsHeader is the exposition's header of kyverno_policy_results_total.
const resultsHeader = `
# HELP kyverno_policy_results_total Rule results, one per rule evaluated.
# TYPE kyverno_policy_results_total counter
`

func TestObserveMutation(t *testing.T) {
	addLabels := loadPolicy(t, "add-labels.yaml")
	defaultSA := loadPolicy(t, "default-sa.yaml")
	podCreate := Request{Kind: "Pod", Namespace: "team-a", Operation: "CREATE", Webhook: Mutating}
	// The labels every sample below shares, in the exposition's order
	// around the policy's own.
	const scoped = `otel_scope_name="kyverno",otel_scope_schema_url="",otel_scope_version=""`
	const addLabelsSeries = `{dry_run="false",` + scoped + `,policy_background_mode="false",policy_name="add-labels",policy_namespace="-",policy_type="cluster",policy_validation_mode="audit",resource_kind="Pod",resource_namespace="team-a",resource_request_operation="create",rule_execution_cause="admission_request",`
	const defaultSASeries = `{dry_run="false",` + scoped + `,policy_background_mode="true",policy_name="default-sa",policy_namespace="team-a",policy_type="namespaced",policy_validation_mode="audit",resource_kind="Pod",resource_namespace="team-a",resource_request_operation="create",rule_execution_cause="admission_request",`

	tests := []struct {
		name string
		req  Request
		resp *engine.MutateResponse
		took time.Duration
		// results is the exposition of kyverno_policy_results_total,
		// without its header.
		results string
		// executionLines are _sum and _count lines of
		// kyverno_policy_execution_duration_seconds that must appear;
		// executionSeries is how many series it must have.
		executionLines  []string
		executionSeries int
	}{
		{
			name: "one sample per rule, the set's time shared among the rules",
			req:  podCreate,
			resp: &engine.MutateResponse{Policies: []engine.PolicyResponse{
				{Policy: addLabels, Key: "add-labels", Rules: []engine.RuleResponse{mutateRule("add-team", engine.StatusPass), mutateRule("add-tier", engine.StatusSkip)}},
				{Policy: defaultSA, Key: "team-a/default-sa", Rules: []engine.RuleResponse{mutateRule("set-sa", engine.StatusError)}},
			}},
			took: 30 * time.Millisecond,
			results: `
kyverno_policy_results_total` + addLabelsSeries + `rule_name="add-team",rule_result="pass",rule_type="mutate"} 1
kyverno_policy_results_total` + addLabelsSeries + `rule_name="add-tier",rule_result="skip",rule_type="mutate"} 1
kyverno_policy_results_total` + defaultSASeries + `rule_name="set-sa",rule_result="error",rule_type="mutate"} 1
`,
			executionLines: []string{
				`kyverno_policy_execution_duration_seconds_sum` + addLabelsSeries + `rule_name="add-team",rule_result="pass",rule_type="mutate"} 0.01`,
				`kyverno_policy_execution_duration_seconds_count` + defaultSASeries + `rule_name="set-sa",rule_result="error",rule_type="mutate"} 1`,
			},
			executionSeries: 3,
		},
		{
			name: "a dry run is labelled so",
			req:  Request{Kind: "Pod", Namespace: "team-a", Operation: "UPDATE", Webhook: Mutating, DryRun: true},
			resp: &engine.MutateResponse{Policies: []engine.PolicyResponse{
				{Policy: addLabels, Key: "add-labels", Rules: []engine.RuleResponse{mutateRule("add-team", engine.StatusPass)}},
			}},
			took: 5 * time.Millisecond,
			results: `
kyverno_policy_results_total{dry_run="true",` + scoped + `,policy_background_mode="false",policy_name="add-labels",policy_namespace="-",policy_type="cluster",policy_validation_mode="audit",resource_kind="Pod",resource_namespace="team-a",resource_request_operation="update",rule_execution_cause="admission_request",rule_name="add-team",rule_result="pass",rule_type="mutate"} 1
`,
			executionSeries: 1,
		},
		{
			name: "untimed: results only, no histogram",
			req:  podCreate,
			resp: &engine.MutateResponse{Policies: []engine.PolicyResponse{
				{Policy: defaultSA, Key: "team-a/default-sa", Rules: []engine.RuleResponse{mutateRule("set-sa", engine.StatusPass)}},
			}},
			took: -1,
			results: `
kyverno_policy_results_total` + defaultSASeries + `rule_name="set-sa",rule_result="pass",rule_type="mutate"} 1
`,
		},
		{
			name: "no rule responded: nothing recorded",
			req:  podCreate,
			resp: &engine.MutateResponse{},
			took: time.Millisecond,
		},
		{
			name: "nil response: nothing recorded",
			req:  podCreate,
			took: time.Millisecond,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			rec, err := New(reg, "test")
			if err != nil {
				t.Fatal(err)
			}
			rec.ObserveMutation(tc.req, tc.resp, tc.took)
			checkRecorded(t, reg, rec, tc.results, tc.executionSeries, tc.executionLines)
		})
	}
}

// checkRecorded compares what reg gathered of kyverno_policy_results_total
// with results (the exposition without its header; "" for none) and checks
// the execution histogram has executionSeries series whose exposition
// holds every one of executionLines.
func checkRecorded(t *testing.T, reg *prometheus.Registry, rec *Recorder, results string, executionSeries int, executionLines []string) {
	t.Helper()
	want := ""
	if results != "" {
		want = resultsHeader + strings.TrimPrefix(results, "\n")
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), PolicyResultsTotal); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(rec.execution, PolicyExecutionDuration); n != executionSeries {
		t.Errorf("%d series of %s, want %d", n, PolicyExecutionDuration, executionSeries)
	}
	got, err := testutil.CollectAndFormat(rec.execution, expfmt.TypeTextPlain, PolicyExecutionDuration)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range executionLines {
		if !strings.Contains(string(got), line) {
			t.Errorf("exposition lacks\n%s\ngot\n%s", line, got)
		}
	}
}

// Once a label tuple's series exist, recording costs no allocation: the
// admission path records for every rule of every request, and background
// scans for every rule of every resource evaluated.
func TestObserveAllocatesNothingOnceSeriesExist(t *testing.T) {
	rec, err := New(prometheus.NewRegistry(), "test")
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Kind: "Pod", Namespace: "team-a", Operation: "CREATE", Webhook: Mutating}
	mutation := &engine.MutateResponse{Policies: []engine.PolicyResponse{
		{Policy: loadPolicy(t, "add-labels.yaml"), Rules: []engine.RuleResponse{mutateRule("add-team", engine.StatusPass), mutateRule("add-tier", engine.StatusSkip)}},
	}}
	validation := engine.PolicyResponse{Policy: loadPolicy(t, "require-labels.yaml"), Rules: []engine.RuleResponse{
		{Name: "check", Type: engine.TypeValidation, Status: engine.StatusFail, Action: engine.Enforce},
	}}
	validation.Duration = time.Millisecond
	scan := &engine.Response{Resource: engine.ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: "team-a", Name: "web"},
		Policies: []engine.PolicyResponse{validation}}
	for name, observe := range map[string]func(){
		"ObserveMutation": func() { rec.ObserveMutation(req, mutation, time.Millisecond) },
		"ObservePolicy":   func() { rec.ObservePolicy(req, validation, time.Millisecond) },
		// The reports controller records every resource of every scan.
		"ObserveScan": func() { rec.ObserveScan(scan) },
	} {
		observe() // creates the series
		if n := testing.AllocsPerRun(100, observe); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}
