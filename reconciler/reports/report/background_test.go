package report

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/generate"
)

func object(apiVersion, kind, namespace, name string) map[string]any {
	meta := map[string]any{"name": name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
}

// TestBackgroundResults: the background controller's responses for a
// trigger become one result per policy, with Kyverno's source, rule and
// process and the generated-resources and patched-target properties
// (cel-policy-types.md §7); other policies' generate and mutate
// responses stay out of reports.
func TestBackgroundResults(t *testing.T) {
	gpol := &policiesv1.GeneratingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "netpol", Annotations: map[string]string{SeverityAnnotation: "low"}}}
	noBackground := false
	mpol := &policiesv1.MutatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "roll"}}
	tenant := &policiesv1.NamespacedMutatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "roll", Namespace: "team-a"},
		Spec: policiesv1.MutatingPolicySpec{EvaluationConfiguration: &policiesv1.MutatingPolicyEvaluationConfiguration{
			Background: &policiesv1.BackgroundConfiguration{Enabled: &noBackground}}}}
	cpol := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cp"}}
	target := func(ns, name string) *engine.ResourceRef {
		return &engine.ResourceRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: name}
	}
	responses := []engine.PolicyResponse{
		{Policy: gpol, Key: "netpol", Rules: []engine.RuleResponse{{
			Name: "netpol", Type: engine.TypeGeneration, Status: engine.StatusPass, Message: "policy evaluated successfully",
			Generated: []generate.DesiredObject{
				{Object: object("networking.k8s.io/v1", "NetworkPolicy", "web", "default-deny")},
				{Object: object("v1", "ConfigMap", "web", "settings")},
				{Object: object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "web-reader")},
			},
		}}},
		{Policy: mpol, Key: "roll", Rules: []engine.RuleResponse{
			{Name: "roll", Type: engine.TypeMutation, Status: engine.StatusSkip, Message: "skip", Target: target("a", "frozen")},
			{Name: "roll", Type: engine.TypeMutation, Status: engine.StatusPass, Message: "success", Target: target("a", "one"), PatchedTarget: object("v1", "ConfigMap", "a", "one")},
			{Name: "roll", Type: engine.TypeMutation, Status: engine.StatusPass, Message: "success", Target: target("b", "two")},
			{Name: "roll", Type: engine.TypeMutation, Status: engine.StatusPass, Message: "success", Target: target("b", "three"), PatchedTarget: object("v1", "ConfigMap", "b", "three")},
		}},
		{Policy: tenant, Key: "team-a/roll", Rules: []engine.RuleResponse{
			{Name: "roll", Type: engine.TypeMutation, Status: engine.StatusPass, Message: "success", Target: target("team-a", "one"), PatchedTarget: object("v1", "ConfigMap", "team-a", "one")},
			{Name: "roll", Type: engine.TypeMutation, Status: engine.StatusError, Message: "failed to evaluate policy: boom", Target: target("team-a", "two")},
		}},
		// A ClusterPolicy's generate and mutate responses are not
		// reported, nor an admission mutation of a MutatingPolicy (no
		// target).
		{Policy: cpol, Key: "cp", Rules: []engine.RuleResponse{{Name: "gen", Type: engine.TypeGeneration, Status: engine.StatusPass}}},
		{Policy: mpol, Key: "roll", Rules: []engine.RuleResponse{{Name: "roll", Type: engine.TypeMutation, Status: engine.StatusPass}}},
	}
	now := time.Unix(1700000000, 500)
	got := Results(responses, nil, ProcessBackground, now)
	// Nanoseconds too: two runs in one second are told apart.
	ts := metav1.Timestamp{Seconds: now.Unix(), Nanos: 500}
	want := []v1alpha2.PolicyReportResult{
		{Source: SourceGeneratingPolicy, Policy: "netpol", Rule: "netpol", Result: "pass", Scored: true, Severity: v1alpha2.SeverityLow,
			Message: "policy evaluated successfully", Timestamp: ts, Properties: map[string]string{
				"process": ProcessAdmission,
				"generated-resources": "networking.k8s.io/v1, Kind=NetworkPolicy Name=default-deny Namespace=web; /v1, Kind=ConfigMap Name=settings Namespace=web; " +
					"rbac.authorization.k8s.io/v1, Kind=ClusterRole Name=web-reader",
			}},
		{Source: SourceMutatingPolicy, Policy: "roll", Rule: "", Result: "pass", Scored: true, Message: "success", Timestamp: ts, Properties: map[string]string{
			"process":        ProcessBackground,
			"patched-target": "/v1, Kind=ConfigMap Name=one Namespace=a; /v1, Kind=ConfigMap Name=three Namespace=b",
		}},
		{Source: SourceMutatingPolicy, Policy: "team-a/roll", Rule: "", Result: "error", Scored: true, Message: "ConfigMap team-a/two: failed to evaluate policy: boom", Timestamp: ts, Properties: map[string]string{
			"process":        ProcessAdmission,
			"patched-target": "/v1, Kind=ConfigMap Name=one Namespace=team-a",
		}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("results\n got %+v\nwant %+v", got, want)
	}

	// The catalog knows their rules, so the writers keep the results.
	catalog := NewCatalog([]kyvernov1.PolicyInterface{gpol, mpol, tenant})
	for _, r := range got {
		if !catalog.HasResult(&r) {
			t.Errorf("catalog lacks %s/%q", r.Policy, r.Rule)
		}
		if !ChartersSource(r.Source) {
			t.Errorf("%s is not charter's source: Merge would drop it", r.Source)
		}
	}
	if merged := Merge(nil, got); len(merged) != len(got) {
		t.Errorf("Merge kept %d of %d results", len(merged), len(got))
	}

	// Of two runs in the same second, the later one wins.
	next := Results(responses[:1], nil, ProcessBackground, now.Add(time.Microsecond))
	next[0].Properties["generated-resources"] = "changed"
	if merged := Merge(got, next); merged[0].Properties["generated-resources"] != "changed" {
		t.Errorf("the later run of the same second lost: %+v", merged[0])
	}
	if merged := Merge(next, got[:1]); merged[0].Properties["generated-resources"] != "changed" {
		t.Errorf("an earlier run replaced a later one: %+v", merged[0])
	}

	// allowed filters by outcome.
	if only := Results(responses, AllowedResults{engine.StatusError: true}, ProcessBackground, now); len(only) != 1 || only[0].Policy != "team-a/roll" {
		t.Errorf("allowed error only: %+v", only)
	}
}
