package metrics

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/charter-dev/charter/engine"
)

func TestObservePolicy(t *testing.T) {
	p := loadPolicy(t, "require-labels.yaml")
	reg := prometheus.NewRegistry()
	rec, err := New(reg, "test")
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Kind: "Pod", Namespace: "default", Operation: "CREATE", Webhook: Validating}
	resp := engine.PolicyResponse{Policy: p, Key: "require-labels", Rules: []engine.RuleResponse{
		{Name: "check", Type: engine.TypeValidation, Status: engine.StatusFail, Action: engine.Enforce},
		{Name: "check-team", Type: engine.TypeValidation, Status: engine.StatusPass, Action: engine.Enforce},
	}}
	rec.ObservePolicy(req, resp, 40*time.Millisecond)
	// Results only, no timing: the counter moves, the histogram does not.
	rec.ObservePolicy(req, resp, -1)

	labels := `dry_run="false",otel_scope_name="kyverno",otel_scope_schema_url="",otel_scope_version="",policy_background_mode="true",policy_name="require-labels",policy_namespace="-",policy_type="cluster",policy_validation_mode="enforce",resource_kind="Pod",resource_namespace="default",resource_request_operation="create",rule_execution_cause="admission_request"`
	want := `
# HELP kyverno_policy_execution_duration_seconds Time to evaluate a rule. The engine is timed per policy; each rule of the policy is given an equal share.
# TYPE kyverno_policy_execution_duration_seconds histogram
kyverno_policy_execution_duration_seconds_bucket{` + labels + `,rule_name="check",rule_result="fail",rule_type="validate",le="0.005"} 0
kyverno_policy_execution_duration_seconds_bucket{` + labels + `,rule_name="check",rule_result="fail",rule_type="validate",le="0.01"} 0
kyverno_policy_execution_duration_seconds_bucket{` + labels + `,rule_name="check",rule_result="fail",rule_type="validate",le="0.025"} 1
`
	got, err := testutil.CollectAndFormat(rec.execution, expfmt.TypeTextPlain, PolicyExecutionDuration)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(want), "\n") {
		if !strings.Contains(string(got), line) {
			t.Errorf("exposition lacks\n%s\ngot\n%s", line, got)
		}
	}
	for _, line := range []string{
		`kyverno_policy_execution_duration_seconds_sum{` + labels + `,rule_name="check",rule_result="fail",rule_type="validate"} 0.02`,
		`kyverno_policy_execution_duration_seconds_count{` + labels + `,rule_name="check-team",rule_result="pass",rule_type="validate"} 1`,
	} {
		if !strings.Contains(string(got), line) {
			t.Errorf("exposition lacks\n%s", line)
		}
	}
	if n := testutil.ToFloat64(rec.results.WithLabelValues("enforce", "cluster", "true", "-", "require-labels",
		"Pod", "default", "create", "check", "fail", "validate", "admission_request", "false")); n != 2 {
		t.Errorf("kyverno_policy_results_total for check = %v, want 2", n)
	}
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	var rec *Recorder
	rec.ObservePolicy(Request{}, engine.PolicyResponse{Rules: []engine.RuleResponse{{Name: "r"}}}, time.Second)
	rec.ObserveResults(Request{}, &engine.Response{})
	rec.ObserveMutation(Request{}, &engine.MutateResponse{}, time.Second)
	rec.ObserveRequest(Request{}, true, time.Second)
	rec.PolicyChanged(nil, "created")
}

// The series cache hands each label tuple its own children, also when
// requests record concurrently.
func TestObserveRequestSeriesPerLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec, err := New(reg, "test")
	if err != nil {
		t.Fatal(err)
	}
	requests := []struct {
		req     Request
		allowed bool
	}{
		{Request{Kind: "Pod", Namespace: "a", Operation: "CREATE", Webhook: Validating}, true},
		{Request{Kind: "Pod", Namespace: "a", Operation: "CREATE", Webhook: Validating}, false},
		{Request{Kind: "Pod", Namespace: "b", Operation: "CREATE", Webhook: Validating}, true},
		{Request{Kind: "Pod", Namespace: "a", Operation: "UPDATE", Webhook: Mutating}, true},
	}
	const workers, rounds = 4, 50
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				for _, r := range requests {
					rec.ObserveRequest(r.req, r.allowed, time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	for _, r := range requests {
		values := []string{r.req.Kind, r.req.Namespace, strings.ToLower(r.req.Operation), strconv.FormatBool(r.allowed), r.req.Webhook}
		if n := testutil.ToFloat64(rec.requests.WithLabelValues(values...)); n != workers*rounds {
			t.Errorf("kyverno_admission_requests_total%v = %v, want %d", values, n, workers*rounds)
		}
	}
	if n := testutil.CollectAndCount(rec.duration, AdmissionReviewDuration); n != len(requests) {
		t.Errorf("%d series of %s, want %d", n, AdmissionReviewDuration, len(requests))
	}
}

// Results recorded without timing leave no histogram series.
func TestObserveResultsWithoutTiming(t *testing.T) {
	p := loadPolicy(t, "require-labels.yaml")
	rec, err := New(prometheus.NewRegistry(), "test")
	if err != nil {
		t.Fatal(err)
	}
	resp := &engine.Response{Policies: []engine.PolicyResponse{{Policy: p, Key: "require-labels", Rules: []engine.RuleResponse{
		{Name: "check", Type: engine.TypeValidation, Status: engine.StatusFail, Action: engine.Enforce},
	}}}}
	rec.ObserveResults(Request{Kind: "Pod", Namespace: "default", Operation: "CREATE"}, resp)
	if n := testutil.CollectAndCount(rec.results, PolicyResultsTotal); n != 1 {
		t.Errorf("%d series of %s, want 1", n, PolicyResultsTotal)
	}
	if n := testutil.CollectAndCount(rec.execution, PolicyExecutionDuration); n != 0 {
		t.Errorf("%d series of %s, want 0", n, PolicyExecutionDuration)
	}
}

// rule_type spells the engine's rule types as Kyverno's metrics do;
// verifyImages rules run with the validate rules at admission and are
// labelled imageVerify.
func TestRuleTypeLabel(t *testing.T) {
	for typ, want := range map[engine.RuleType]string{
		engine.TypeValidation:  "validate",
		engine.TypeMutation:    "mutate",
		engine.TypeGeneration:  "generate",
		engine.TypeImageVerify: "imageVerify",
		"":                     "-",
	} {
		if got := ruleType(typ); got != want {
			t.Errorf("ruleType(%q) = %q, want %q", typ, got, want)
		}
	}
}
