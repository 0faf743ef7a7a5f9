package metrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/enginetest"
)

// TestCELKindMetrics: results of ValidatingPolicies,
// ImageValidatingPolicies and MutatingPolicies are counted in their
// kind's family as Kyverno's CEL engines count them, at admission and in
// background scans; ClusterPolicies are not.
func TestCELKindMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec, err := New(reg, "test")
	if err != nil {
		t.Fatal(err)
	}
	vpol := loadPolicy(t, "vpol-no-latest.yaml")
	off := false
	ivpol := &policiesv1.ImageValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "signed-images"},
		Spec: policiesv1.ImageValidatingPolicySpec{ValidationAction: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit},
			EvaluationConfiguration: &policiesv1.EvaluationConfiguration{Background: &policiesv1.BackgroundConfiguration{Enabled: &off}}}}
	mpol := &policiesv1.NamespacedMutatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "add-team", Namespace: "team-a"}}
	cpol := loadPolicy(t, "require-labels.yaml")

	req := Request{Kind: "Pod", Namespace: "team-a", Operation: "CREATE", Webhook: Validating}
	rec.ObservePolicy(req, engine.PolicyResponse{Policy: vpol, Rules: []engine.RuleResponse{{Type: engine.TypeValidation, Status: engine.StatusFail, Action: engine.Enforce}}}, 2*time.Millisecond)
	rec.ObservePolicy(req, engine.PolicyResponse{Policy: ivpol, Rules: []engine.RuleResponse{{Name: "signed-images", Type: engine.TypeImageVerify, Status: engine.StatusPass, Action: engine.Audit}}}, 4*time.Millisecond)
	rec.ObservePolicy(req, engine.PolicyResponse{Policy: cpol, Rules: []engine.RuleResponse{{Name: "check", Type: engine.TypeValidation, Status: engine.StatusPass, Action: engine.Audit}}}, time.Millisecond)
	rec.ObserveMutation(Request{Kind: "Pod", Namespace: "team-a", Operation: "CREATE", Webhook: Mutating},
		&engine.MutateResponse{Policies: []engine.PolicyResponse{{Policy: mpol, Rules: []engine.RuleResponse{{Type: engine.TypeMutation, Status: engine.StatusPass}}}}}, time.Millisecond)
	scanned := engine.PolicyResponse{Policy: ivpol, Rules: []engine.RuleResponse{{Name: "signed-images", Type: engine.TypeImageVerify, Status: engine.StatusFail}}}
	scanned.Duration = 3 * time.Millisecond
	rec.ObserveScan(&engine.Response{Resource: engine.ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: "shop", Name: "web"}, Policies: []engine.PolicyResponse{scanned}})

	const scoped = `otel_scope_name="kyverno",otel_scope_schema_url="",otel_scope_version=""`
	want := `
# HELP kyverno_validating_policy_results_total Results of validating policy kinds, one per policy evaluated.
# TYPE kyverno_validating_policy_results_total counter
kyverno_validating_policy_results_total{execution_cause="admission_request",` + scoped + `,policy_background_mode="false",policy_name="no-latest",policy_namespace="team-a",policy_validation_mode="enforce",resource_kind="Pod",resource_namespace="team-a",resource_request_operation="create",result="fail"} 1
# HELP kyverno_image_validating_policy_results_total Results of image validating policy kinds, one per policy evaluated.
# TYPE kyverno_image_validating_policy_results_total counter
kyverno_image_validating_policy_results_total{execution_cause="admission_request",` + scoped + `,policy_background_mode="false",policy_name="signed-images",policy_namespace="-",policy_validation_mode="audit",resource_kind="Pod",resource_namespace="team-a",resource_request_operation="create",result="pass"} 1
kyverno_image_validating_policy_results_total{execution_cause="background_scan",` + scoped + `,policy_background_mode="false",policy_name="signed-images",policy_namespace="-",policy_validation_mode="audit",resource_kind="Pod",resource_namespace="shop",resource_request_operation="create",result="fail"} 1
# HELP kyverno_mutating_policy_results_total Results of mutating policy kinds, one per policy evaluated.
# TYPE kyverno_mutating_policy_results_total counter
kyverno_mutating_policy_results_total{execution_cause="admission_request",` + scoped + `,policy_background_mode="true",policy_name="add-team",policy_namespace="team-a",policy_validation_mode="audit",resource_kind="Pod",resource_namespace="team-a",resource_request_operation="create",result="pass"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), ValidatingPolicyResultsTotal, ImageValidatingPolicyResultsTotal, MutatingPolicyResultsTotal); err != nil {
		t.Error(err)
	}
	// Each timed result has its execution time in its family's histogram.
	for name, series := range map[string]int{
		"kyverno_validating_policy_execution_duration_seconds":       1,
		"kyverno_image_validating_policy_execution_duration_seconds": 2,
		"kyverno_mutating_policy_execution_duration_seconds":         1,
	} {
		if got, err := testutil.GatherAndCount(reg, name); err != nil || got != series {
			t.Errorf("%s: %d series, %v; want %d", name, got, err, series)
		}
	}
	// ClusterPolicies count in kyverno_policy_results_total only; CEL
	// kinds are counted there too, so one query sees every policy.
	if n := testutil.CollectAndCount(rec.results, PolicyResultsTotal); n != 5 {
		t.Errorf("%d series of %s, want 5 (every result above)", n, PolicyResultsTotal)
	}
}

// TestGeneratingPolicyMetrics: a GeneratingPolicy run of the background
// controller is counted in kyverno_generating_policy_results_total, with
// the cause background_scan whatever the trigger's operation (as Kyverno
// counts them), and timed by the engine in its histogram; it counts in
// kyverno_policy_results_total as a generate rule too.
func TestGeneratingPolicyMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec, err := New(reg, "test")
	if err != nil {
		t.Fatal(err)
	}
	set := enginetest.Set(t, loadPolicy(t, "gpol-quota.yaml"))
	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "web", "uid": "u1"}}
	resp := set.Generate(context.Background(), &engine.Request{Operation: kyvernov1.Create, Object: ns})
	if len(resp.Policies) != 1 || resp.Policies[0].Duration <= 0 {
		t.Fatalf("the engine's response is not one timed policy: %+v", resp.Policies)
	}
	rec.ObserveGenerating(resp.Resource, "UPDATE", resp.Policies[0])
	rec.ObserveGenerating(resp.Resource, "", resp.Policies[0])

	const scoped = `otel_scope_name="kyverno",otel_scope_schema_url="",otel_scope_version=""`
	want := `
# HELP kyverno_generating_policy_results_total Results of generating policy kinds, one per policy evaluated.
# TYPE kyverno_generating_policy_results_total counter
kyverno_generating_policy_results_total{execution_cause="background_scan",` + scoped + `,policy_background_mode="false",policy_name="quota",policy_namespace="-",policy_validation_mode="audit",resource_kind="Namespace",resource_namespace="",resource_request_operation="create",result="pass"} 1
kyverno_generating_policy_results_total{execution_cause="background_scan",` + scoped + `,policy_background_mode="false",policy_name="quota",policy_namespace="-",policy_validation_mode="audit",resource_kind="Namespace",resource_namespace="",resource_request_operation="update",result="pass"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), GeneratingPolicyResultsTotal); err != nil {
		t.Error(err)
	}
	if got, err := testutil.GatherAndCount(reg, "kyverno_generating_policy_execution_duration_seconds"); err != nil || got != 2 {
		t.Errorf("kyverno_generating_policy_execution_duration_seconds: %d series, %v; want 2", got, err)
	}
	want = resultsHeader + `kyverno_policy_results_total{dry_run="false",` + scoped + `,policy_background_mode="false",policy_name="quota",policy_namespace="-",policy_type="cluster",policy_validation_mode="audit",resource_kind="Namespace",resource_namespace="",resource_request_operation="create",rule_execution_cause="background_scan",rule_name="quota",rule_result="pass",rule_type="generate"} 1
kyverno_policy_results_total{dry_run="false",` + scoped + `,policy_background_mode="false",policy_name="quota",policy_namespace="-",policy_type="cluster",policy_validation_mode="audit",resource_kind="Namespace",resource_namespace="",resource_request_operation="update",rule_execution_cause="background_scan",rule_name="quota",rule_result="pass",rule_type="generate"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), PolicyResultsTotal); err != nil {
		t.Error(err)
	}
}

// TestCELPolicyModesAreTheirSpecViews: the mode and background labels of
// a ValidatingPolicy or ImageValidatingPolicy, read from its own spec, are
// those of its ClusterPolicy view (GetSpec) for every validationActions
// and evaluation.background, and recording one allocates nothing once its
// series exist.
func TestCELPolicyModesAreTheirSpecViews(t *testing.T) {
	on, off := true, false
	actions := [][]admissionregistrationv1.ValidationAction{nil, {admissionregistrationv1.Deny}, {admissionregistrationv1.Audit},
		{admissionregistrationv1.Warn}, {admissionregistrationv1.Audit, admissionregistrationv1.Warn}, {admissionregistrationv1.Warn, admissionregistrationv1.Deny}}
	evals := []*policiesv1.EvaluationConfiguration{nil, {Background: &policiesv1.BackgroundConfiguration{Enabled: &on}},
		{Background: &policiesv1.BackgroundConfiguration{Enabled: &off}}}
	rec, err := New(prometheus.NewRegistry(), "test")
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Kind: "Pod", Namespace: "team-a", Operation: "CREATE", Webhook: Validating}
	for _, a := range actions {
		for _, e := range evals {
			meta := metav1.ObjectMeta{Name: "p", Namespace: "team-a"}
			for _, p := range []kyvernov1.PolicyInterface{
				&policiesv1.ValidatingPolicy{ObjectMeta: meta, Spec: policiesv1.ValidatingPolicySpec{ValidationAction: a, EvaluationConfiguration: e}},
				&policiesv1.NamespacedValidatingPolicy{ObjectMeta: meta, Spec: policiesv1.ValidatingPolicySpec{ValidationAction: a, EvaluationConfiguration: e}},
				&policiesv1.ImageValidatingPolicy{ObjectMeta: meta, Spec: policiesv1.ImageValidatingPolicySpec{ValidationAction: a, EvaluationConfiguration: e}},
				&policiesv1.NamespacedImageValidatingPolicy{ObjectMeta: meta, Spec: policiesv1.ImageValidatingPolicySpec{ValidationAction: a, EvaluationConfiguration: e}},
			} {
				enforce, background := policyModes(p)
				wantEnforce, wantBackground := specModes(p.GetSpec())
				if enforce != wantEnforce || background != wantBackground {
					t.Errorf("%s actions %v background %v: enforce %v background %v, its spec view says %v %v",
						p.GetKind(), a, e, enforce, background, wantEnforce, wantBackground)
				}
				resp := engine.PolicyResponse{Policy: p, Rules: []engine.RuleResponse{{Type: engine.TypeValidation, Status: engine.StatusFail, Action: engine.Enforce}}}
				observe := func() { rec.ObservePolicy(req, resp, time.Millisecond) }
				observe() // creates the series
				if n := testing.AllocsPerRun(20, observe); n != 0 {
					t.Errorf("%s actions %v background %v: ObservePolicy allocates %v per call, want 0", p.GetKind(), a, e, n)
				}
			}
		}
	}
}
