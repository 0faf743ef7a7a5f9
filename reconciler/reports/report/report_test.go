package report

import (
	"context"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/api/policyreport"
	"github.com/charter-dev/charter/api/policyreport/v1alpha2"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/enginetest"
)

func loadPolicies(t *testing.T) []kyvernov1.PolicyInterface {
	t.Helper()
	data, err := os.ReadFile("testdata/policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []kyvernov1.PolicyInterface
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		var p kyvernov1.PolicyInterface
		if meta.Kind == "Policy" {
			p = &kyvernov1.Policy{}
		} else {
			p = &kyvernov1.ClusterPolicy{}
		}
		if err := yaml.UnmarshalStrict([]byte(doc), p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func evaluatePod(t *testing.T, policies []kyvernov1.PolicyInterface) []engine.PolicyResponse {
	t.Helper()
	set := enginetest.Set(t, policies...)
	data, err := os.ReadFile("testdata/pod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pod unstructured.Unstructured
	if err := yaml.Unmarshal(data, &pod.Object); err != nil {
		t.Fatal(err)
	}
	return set.Validate(context.Background(), engine.RequestForObject(&pod)).Policies
}

func TestResultsFields(t *testing.T) {
	now := time.Unix(1700000000, 123)
	got := Results(evaluatePod(t, loadPolicies(t)), nil, ProcessBackground, now)
	want := []v1alpha2.PolicyReportResult{
		{
			Source: Source, Policy: "disallow-latest", Rule: "no-latest",
			Result: v1alpha2.StatusWarn, Scored: false, Message: "pin your images",
			Properties: map[string]string{"failMessage": "pin your images", "owner": "platform", "process": ProcessBackground},
		},
		{
			Source: Source, Policy: "require-team-label", Rule: "check-team",
			Result: v1alpha2.StatusFail, Scored: true, Severity: v1alpha2.SeverityMedium, Category: "Best Practices",
			Message:    "validation error: label team is required. rule check-team failed at path /metadata/labels/",
			Properties: map[string]string{"process": ProcessBackground},
		},
		{
			Source: Source, Policy: "team-a/admission-only", Rule: "always",
			Result: v1alpha2.StatusPass, Scored: true, Message: "validation rule 'always' passed.",
			Properties: map[string]string{"process": ProcessBackground},
		},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		want[i].Timestamp = metav1.Timestamp{Seconds: now.Unix()}
		g, w := got[i], want[i]
		if g.Source != w.Source || g.Policy != w.Policy || g.Rule != w.Rule || g.Result != w.Result ||
			g.Scored != w.Scored || g.Severity != w.Severity || g.Category != w.Category ||
			g.Message != w.Message || g.Timestamp != w.Timestamp || !equalMaps(g.Properties, w.Properties) {
			t.Errorf("result %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

// process says which path produced each result, whatever the policy's
// background and admission settings.
func TestResultsProcess(t *testing.T) {
	responses := evaluatePod(t, loadPolicies(t))
	for _, process := range []string{ProcessAdmission, ProcessBackground} {
		got := Results(responses, nil, process, time.Now())
		if len(got) != 3 {
			t.Fatalf("got %d results, want 3", len(got))
		}
		for _, r := range got {
			if r.Properties["process"] != process {
				t.Errorf("%s %s/%s: process %q, want %q", process, r.Policy, r.Rule, r.Properties["process"], process)
			}
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func TestResultsAllowed(t *testing.T) {
	responses := evaluatePod(t, loadPolicies(t))
	tests := []struct {
		allowed string
		want    []string // policy names kept
	}{
		{"", []string{"disallow-latest", "require-team-label", "team-a/admission-only"}},
		{"pass", []string{"team-a/admission-only"}},
		// The unscored policy's fail shows as warn but is filtered as fail.
		{"fail", []string{"disallow-latest", "require-team-label"}},
		{"warn,error", nil},
	}
	for _, tt := range tests {
		t.Run(tt.allowed, func(t *testing.T) {
			allowed, err := ParseAllowedResults(tt.allowed)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range Results(responses, allowed, ProcessBackground, time.Now()) {
				got = append(got, r.Policy)
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("kept %v, want %v", got, tt.want)
			}
			// What the admission writer asks before it drops an
			// admission's results without making them.
			if Reportable(responses, allowed) != (len(tt.want) > 0) {
				t.Errorf("Reportable = %v with %d results kept", !(len(tt.want) > 0), len(tt.want))
			}
		})
	}
}

func TestParseAllowedResultsRejectsUnknown(t *testing.T) {
	_, err := ParseAllowedResults("fail,failed")
	if err == nil || !strings.Contains(err.Error(), `"failed"`) {
		t.Fatalf("got %v, want an error naming \"failed\"", err)
	}
}

func res(policy, rule string, result v1alpha2.PolicyResult, ts int64) v1alpha2.PolicyReportResult {
	return v1alpha2.PolicyReportResult{Source: Source, Policy: policy, Rule: rule, Result: result, Timestamp: metav1.Timestamp{Seconds: ts}}
}

func summary(results []v1alpha2.PolicyReportResult) string {
	var parts []string
	for _, r := range results {
		parts = append(parts, r.Policy+"/"+r.Rule+"="+string(r.Result))
	}
	return strings.Join(parts, " ")
}

var catalog = Catalog{
	Source + "/a":    {"r1": true, "r2": true, "autogen-r1": true},
	Source + "/b":    {"r1": true},
	Source + "/ns/c": {"r1": true},
}

func TestMerge(t *testing.T) {
	tests := []struct {
		name               string
		existing, incoming []v1alpha2.PolicyReportResult
		want               string
	}{
		{
			name:     "newer incoming wins",
			existing: []v1alpha2.PolicyReportResult{res("a", "r1", "fail", 10)},
			incoming: []v1alpha2.PolicyReportResult{res("a", "r1", "pass", 11)},
			want:     "a/r1=pass",
		},
		{
			name:     "tie keeps the existing result",
			existing: []v1alpha2.PolicyReportResult{res("a", "r1", "fail", 10)},
			incoming: []v1alpha2.PolicyReportResult{res("a", "r1", "pass", 10)},
			want:     "a/r1=fail",
		},
		{
			name:     "older incoming loses",
			existing: []v1alpha2.PolicyReportResult{res("a", "r1", "fail", 10)},
			incoming: []v1alpha2.PolicyReportResult{res("a", "r1", "pass", 9)},
			want:     "a/r1=fail",
		},
		{
			name:     "other rules of the policy stay",
			existing: []v1alpha2.PolicyReportResult{res("a", "r2", "fail", 10)},
			incoming: []v1alpha2.PolicyReportResult{res("a", "r1", "pass", 11)},
			want:     "a/r1=pass a/r2=fail",
		},
		{
			// A writer whose view of the policies lags must not drop the
			// results of a policy just added: stale results are the
			// leader's to drop.
			name:     "existing results are kept whatever their policy",
			existing: []v1alpha2.PolicyReportResult{res("new", "r1", "fail", 10)},
			incoming: []v1alpha2.PolicyReportResult{res("ns/c", "r1", "pass", 11)},
			want:     "new/r1=fail ns/c/r1=pass",
		},
		{
			name:     "results of other sources are dropped",
			existing: []v1alpha2.PolicyReportResult{{Source: "kyverno", Policy: "a", Rule: "r1", Result: "fail"}},
			want:     "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := summary(Merge(tt.existing, tt.incoming)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReplaceBackground(t *testing.T) {
	existing := []v1alpha2.PolicyReportResult{
		res("a", "r1", "fail", 10),
		res("a", "r2", "fail", 10), // the rule no longer matches: the scan has no result
		res("b", "r1", "pass", 10), // admission-only policy: kept
		// Unknown to the scan's catalog: a policy newer than the scan's
		// snapshot, whose admission result must survive (the sweep drops
		// results of policies really gone).
		res("newer", "r1", "fail", 10),
	}
	scan := []v1alpha2.PolicyReportResult{res("a", "r1", "pass", 5)}
	got := summary(ReplaceBackground(existing, scan, map[string]bool{Source + "/a": true}, catalog))
	if want := "a/r1=pass b/r1=pass newer/r1=fail"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// An admission result and the scan's of the same verdict differ only in
// timestamp and process: the scan keeps the admission's, and the digest
// does not tell them apart, so neither writer rewrites the report (Kyverno
// writes it once: its e2e tests assert metadata.generation 1).
func TestScanKeepsTheSameOutcome(t *testing.T) {
	admitted := res("a", "r1", "fail", 10)
	admitted.Properties = map[string]string{"process": ProcessAdmission}
	scanned := res("a", "r1", "fail", 20)
	scanned.Properties = map[string]string{"process": ProcessBackground}
	got := ReplaceBackground([]v1alpha2.PolicyReportResult{admitted}, []v1alpha2.PolicyReportResult{scanned}, map[string]bool{Source + "/a": true}, catalog)
	if len(got) != 1 || got[0].Properties["process"] != ProcessAdmission || got[0].Timestamp.Seconds != 10 {
		t.Errorf("ReplaceBackground gave %+v, want the admission's result kept", got)
	}
	if !Equivalent([]v1alpha2.PolicyReportResult{admitted}, []v1alpha2.PolicyReportResult{scanned}) {
		t.Error("results differing only in timestamp and process are not equivalent")
	}
	admittedLater := admitted
	admittedLater.Timestamp.Seconds = 30
	merged := Merge([]v1alpha2.PolicyReportResult{scanned}, []v1alpha2.PolicyReportResult{admittedLater})
	if len(merged) != 1 || merged[0].Properties["process"] != ProcessBackground {
		t.Errorf("Merge gave %+v, want the scan's result kept", merged)
	}

	changed := scanned
	changed.Result = v1alpha2.StatusPass
	got = ReplaceBackground([]v1alpha2.PolicyReportResult{admitted}, []v1alpha2.PolicyReportResult{changed}, map[string]bool{Source + "/a": true}, catalog)
	if len(got) != 1 || got[0].Result != v1alpha2.StatusPass {
		t.Errorf("ReplaceBackground gave %+v, want the scan's new verdict", got)
	}
	withException := scanned
	withException.Properties = map[string]string{"process": ProcessBackground, "exceptions": "e"}
	if SameOutcome(&admitted, &withException) {
		t.Error("results with different properties besides process have the same outcome")
	}
}

func TestPrune(t *testing.T) {
	in := []v1alpha2.PolicyReportResult{res("b", "r1", "pass", 1), res("a", "gone", "fail", 1), res("a", "r1", "fail", 1)}
	if got, want := summary(Prune(in, catalog)), "a/r1=fail b/r1=pass"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestDigestIgnoresTimestamps(t *testing.T) {
	a := []v1alpha2.PolicyReportResult{res("a", "r1", "fail", 10)}
	b := []v1alpha2.PolicyReportResult{res("a", "r1", "fail", 99)}
	c := []v1alpha2.PolicyReportResult{res("a", "r1", "pass", 10)}
	if !Equivalent(a, b) {
		t.Error("results that differ only in timestamp are not equivalent")
	}
	if Equivalent(a, c) {
		t.Error("results with different outcomes are equivalent")
	}
	if Equivalent(a, nil) {
		t.Error("a result list is equivalent to an empty one")
	}
}

func TestObjectRoundTrip(t *testing.T) {
	// Every field a result can carry, so that a field one API's types
	// lose shows as a difference.
	full := res("a", "r1", "fail", 10)
	full.Timestamp.Nanos = 7
	full.Category, full.Severity, full.Scored, full.Message = "Pod Security", v1alpha2.SeverityHigh, true, "privileged"
	full.Properties = map[string]string{"process": ProcessAdmission}
	full.Resources = []corev1.ObjectReference{{APIVersion: "v1", Kind: "Pod", Namespace: "team-a", Name: "web", UID: "uid-1"}}
	full.ResourceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	results := []v1alpha2.PolicyReportResult{full, res("b", "r1", "pass", 10)}
	pod := Scope{APIVersion: "v1", Kind: "Pod", Namespace: "team-a", Name: "web", UID: "uid-1"}
	ns := Scope{APIVersion: "v1", Kind: "Namespace", Name: "team-a", UID: "uid-2"}
	tests := []struct {
		api            policyreport.API
		scope          Scope
		wantAPIVersion string
		wantKind       string
	}{
		{policyreport.WGPolicyK8s, pod, "wgpolicyk8s.io/v1alpha2", "PolicyReport"},
		{policyreport.WGPolicyK8s, ns, "wgpolicyk8s.io/v1alpha2", "ClusterPolicyReport"},
		{policyreport.OpenReports, pod, "openreports.io/v1alpha1", "Report"},
		{policyreport.OpenReports, ns, "openreports.io/v1alpha1", "ClusterReport"},
	}
	for _, tt := range tests {
		t.Run(tt.wantKind, func(t *testing.T) {
			u := Object(tt.api, "", tt.scope, results)
			if u.GetKind() != tt.wantKind || u.GetAPIVersion() != tt.wantAPIVersion {
				t.Errorf("kind %s %s, want %s %s", u.GetAPIVersion(), u.GetKind(), tt.wantAPIVersion, tt.wantKind)
			}
			if got := tt.scope.ReportResource(tt.api); got.GroupVersion().String() != tt.wantAPIVersion || got.Resource != strings.ToLower(tt.wantKind)+"s" {
				t.Errorf("resource %v, want %s %ss", got, tt.wantAPIVersion, strings.ToLower(tt.wantKind))
			}
			// The results' fields sit under the same names in both APIs
			// (OpenReports' Go types call two of them Description and
			// Subjects).
			first, _, _ := unstructured.NestedSlice(u.Object, "results")
			if r, _ := first[0].(map[string]any); r["message"] != "privileged" || r["resources"] == nil || r["severity"] != "high" {
				t.Errorf("first result %v lacks message, resources or severity", first[0])
			}
			if u.GetName() != string(tt.scope.UID) || u.GetNamespace() != tt.scope.Namespace {
				t.Errorf("named %s/%s, want %s/%s", u.GetNamespace(), u.GetName(), tt.scope.Namespace, tt.scope.UID)
			}
			if u.GetLabels()[ManagedByLabel] != ManagedBy {
				t.Errorf("labels %v lack %s=%s", u.GetLabels(), ManagedByLabel, ManagedBy)
			}
			owners := u.GetOwnerReferences()
			if len(owners) != 1 || owners[0].UID != tt.scope.UID || owners[0].Kind != tt.scope.Kind || owners[0].Name != tt.scope.Name {
				t.Errorf("owners %+v, want the resource", owners)
			}
			pass, _, _ := unstructured.NestedInt64(u.Object, "summary", "pass")
			fail, _, _ := unstructured.NestedInt64(u.Object, "summary", "fail")
			if pass != 1 || fail != 1 {
				t.Errorf("summary pass=%d fail=%d, want 1 and 1", pass, fail)
			}
			if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "creationTimestamp"); found {
				t.Error("the object carries a creationTimestamp")
			}
			p, err := Parse(u)
			if err != nil {
				t.Fatal(err)
			}
			if p.Scope != tt.scope || p.ManagedBy != ManagedBy || !reflect.DeepEqual(p.Results, results) {
				t.Errorf("parsed %+v, want scope %+v and the results back", p, tt.scope)
			}
		})
	}
}

// TestDigestSeesEveryField changes one field at a time: each change must
// change the digest, or a changed result would never be written.
func TestDigestSeesEveryField(t *testing.T) {
	base := func() v1alpha2.PolicyReportResult {
		r := res("a", "r1", "fail", 10)
		r.Message, r.Category, r.Severity, r.Scored = "m", "c", v1alpha2.SeverityHigh, true
		r.Properties = map[string]string{"process": ProcessBackground, "exceptions": "e"}
		return r
	}
	tests := []struct {
		name   string
		change func(r *v1alpha2.PolicyReportResult)
	}{
		{"source", func(r *v1alpha2.PolicyReportResult) { r.Source = "kyverno" }},
		{"policy", func(r *v1alpha2.PolicyReportResult) { r.Policy = "b" }},
		{"rule", func(r *v1alpha2.PolicyReportResult) { r.Rule = "r2" }},
		{"category", func(r *v1alpha2.PolicyReportResult) { r.Category = "" }},
		{"severity", func(r *v1alpha2.PolicyReportResult) { r.Severity = v1alpha2.SeverityLow }},
		{"result", func(r *v1alpha2.PolicyReportResult) { r.Result = v1alpha2.StatusPass }},
		{"scored", func(r *v1alpha2.PolicyReportResult) { r.Scored = false }},
		{"message", func(r *v1alpha2.PolicyReportResult) { r.Message = "m2" }},
		{"property value", func(r *v1alpha2.PolicyReportResult) { r.Properties["exceptions"] = "x" }},
		{"property added", func(r *v1alpha2.PolicyReportResult) { r.Properties["policies"] = "x" }},
		{"resources", func(r *v1alpha2.PolicyReportResult) { r.Resources = []corev1.ObjectReference{{Kind: "Pod", Name: "p"}} }},
		{"resource selector", func(r *v1alpha2.PolicyReportResult) { r.ResourceSelector = &metav1.LabelSelector{} }},
		// Field boundaries: moving text from one field to the next is a change.
		{"boundary", func(r *v1alpha2.PolicyReportResult) { r.Policy, r.Rule = "ar", "1" }},
	}
	want := Digest([]v1alpha2.PolicyReportResult{base()})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base()
			tt.change(&r)
			if Digest([]v1alpha2.PolicyReportResult{r}) == want {
				t.Errorf("changing the %s leaves the digest unchanged", tt.name)
			}
		})
	}
}

// A ClusterPolicy and a ValidatingPolicy of one name: their results share
// the policy field and differ in source, and neither policy's results
// replace, prune or overwrite the other's.
func TestSameNamePoliciesKeepTheirOwnResults(t *testing.T) {
	cp := &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: "same"}, Spec: kyvernov1.Spec{Rules: []kyvernov1.Rule{{Name: "check"}}}}
	vp := &policiesv1.ValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "same"}, Spec: policiesv1.ValidatingPolicySpec{
		MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{}}}}}
	cat := NewCatalog([]kyvernov1.PolicyInterface{cp, vp})
	if PolicyRef(cp) == PolicyRef(vp) {
		t.Fatalf("one PolicyRef %q for both", PolicyRef(cp))
	}
	cpResult := v1alpha2.PolicyReportResult{Source: Source, Policy: "same", Rule: "check", Result: "fail", Timestamp: metav1.Timestamp{Seconds: 10}}
	vpResult := v1alpha2.PolicyReportResult{Source: SourceValidatingPolicy, Policy: "same", Rule: "", Result: "pass", Timestamp: metav1.Timestamp{Seconds: 10}}
	if !cat.HasResult(&cpResult) || !cat.HasResult(&vpResult) {
		t.Fatalf("catalog %v lacks a result's policy or rule", cat)
	}
	if cat.HasResult(&v1alpha2.PolicyReportResult{Source: SourceValidatingPolicy, Policy: "same", Rule: "check"}) {
		t.Error("the ValidatingPolicy has the ClusterPolicy's rule")
	}
	both := []v1alpha2.PolicyReportResult{cpResult, vpResult}
	if got := Prune(both, cat); len(got) != 2 {
		t.Errorf("Prune kept %v, want both", got)
	}
	if got := Merge([]v1alpha2.PolicyReportResult{cpResult}, []v1alpha2.PolicyReportResult{vpResult}); len(got) != 2 {
		t.Errorf("Merge gave %v, want both", got)
	}
	// A scan of the ValidatingPolicy alone replaces its results only.
	newer := vpResult
	newer.Result, newer.Timestamp.Seconds = "fail", 20
	got := ReplaceBackground(both, []v1alpha2.PolicyReportResult{newer}, map[string]bool{PolicyRef(vp): true}, cat)
	bySource := map[string]string{}
	for _, r := range got {
		bySource[r.Source] = string(r.Result) + "@" + strconv.FormatInt(r.Timestamp.Seconds, 10)
	}
	if len(got) != 2 || bySource[Source] != "fail@10" || bySource[SourceValidatingPolicy] != "fail@20" {
		t.Errorf("ReplaceBackground gave %+v, want the ClusterPolicy's fail kept and the ValidatingPolicy's new fail", got)
	}
}

// Results makes its slice at the size it needs: the admission writer
// keeps it as it is while the resource waits for its report.
func TestResultsSliceFits(t *testing.T) {
	responses := evaluatePod(t, loadPolicies(t))
	now := time.Unix(1700000000, 0)
	for _, allowed := range []AllowedResults{nil, {engine.StatusFail: true}, {engine.StatusError: true}} {
		got := Results(responses, allowed, ProcessAdmission, now)
		if cap(got) != len(got) {
			t.Errorf("allowed %v: %d results in a slice of capacity %d", allowed, len(got), cap(got))
		}
	}
}
