package status

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/api/conditions"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/clusterstate/policycache"
)

// load reads a ClusterPolicy or Policy from testdata.
func load(t *testing.T, file string) kyvernov1.PolicyInterface {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		t.Fatal(err)
	}
	var p kyvernov1.PolicyInterface = &kyvernov1.ClusterPolicy{}
	switch tm.Kind {
	case kyvernov1.PolicyKind:
		p = &kyvernov1.Policy{}
	case policiesv1.MutatingPolicyKind:
		p = &policiesv1.MutatingPolicy{}
	case policiesv1.ValidatingPolicyKind:
		p = &policiesv1.ValidatingPolicy{}
	case policiesv1.ImageValidatingPolicyKind:
		p = &policiesv1.ImageValidatingPolicy{}
	}
	if err := yaml.UnmarshalStrict(data, p); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return p
}

func snapshot(t *testing.T, policies ...kyvernov1.PolicyInterface) *policycache.Snapshot {
	t.Helper()
	s, err := policycache.Build(policies, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// withGeneration is p edited by a user: same object, next generation.
func withGeneration(p kyvernov1.PolicyInterface, gen int64) kyvernov1.PolicyInterface {
	c := p.CreateDeepCopy()
	c.SetGeneration(gen)
	return c
}

func TestDecide(t *testing.T) {
	valid := load(t, "require-labels.yaml")
	invalid := load(t, "bad-anchor.yaml")
	// The same name as valid, edited into an invalid policy.
	broken := withGeneration(valid, 2)
	broken.GetSpec().Rules[0].Validation = invalid.GetSpec().Rules[0].Validation
	fixed := withGeneration(invalid, 2)
	fixed.GetSpec().Rules[0].Validation = valid.GetSpec().Rules[0].Validation
	badAnchor := `spec.rules[0].validate.pattern.spec.containers[0]: unknown anchor "~(x)"`

	tests := []struct {
		name        string
		policy      kyvernov1.PolicyInterface
		snapshot    *policycache.Snapshot
		wantDecided bool
		want        Verdict
		wantMessage string // a substring, for engine faults
	}{
		{name: "served: ready", policy: valid, snapshot: snapshot(t, valid),
			wantDecided: true, want: Verdict{Ready: true, Generation: 1, Message: "Ready"}},
		{name: "served from the fail-open set: ready", policy: load(t, "fail-open.yaml"), snapshot: snapshot(t, load(t, "fail-open.yaml")),
			wantDecided: true, want: Verdict{Ready: true, Generation: 3, Message: "Ready"}},
		{name: "a namespaced Policy: ready", policy: load(t, "team-policy.yaml"), snapshot: snapshot(t, load(t, "team-policy.yaml")),
			wantDecided: true, want: Verdict{Ready: true, Generation: 2, Message: "Ready"}},
		{name: "does not compile: not ready, with the field path", policy: invalid, snapshot: snapshot(t, invalid),
			wantDecided: true, want: Verdict{Generation: 1}, wantMessage: badAnchor},
		{name: "edited into an invalid policy, snapshot caught up", policy: broken, snapshot: snapshot(t, broken),
			wantDecided: true, want: Verdict{Generation: 2}, wantMessage: badAnchor},
		{name: "edited, snapshot still serves the old generation: wait", policy: withGeneration(valid, 2), snapshot: snapshot(t, valid)},
		{name: "fixed, snapshot still has the old faults: wait", policy: fixed, snapshot: snapshot(t, invalid)},
		{name: "new, not in the snapshot yet: wait", policy: valid, snapshot: snapshot(t)},
		{name: "spec.admission false: ready when it compiles", policy: load(t, "background-only.yaml"), snapshot: snapshot(t, load(t, "background-only.yaml")),
			wantDecided: true, want: Verdict{Ready: true, Generation: 1, Message: "Ready"}},
		{name: "spec.admission false and invalid: not ready", policy: load(t, "background-only-bad.yaml"), snapshot: snapshot(t, load(t, "background-only-bad.yaml")),
			wantDecided: true, want: Verdict{Generation: 1}, wantMessage: `spec.rules[0].validate.pattern.metadata.labels: unknown anchor "~(x)"`},
		{name: "served but using what charter cannot run in the cluster: Unsupported", policy: load(t, "assert-audit.yaml"),
			snapshot: snapshot(t, load(t, "assert-audit.yaml")), wantDecided: true,
			want: Verdict{Generation: 1, Reason: "Unsupported", Message: "spec.rules[0].validate.assert: validate.assert is not supported by charter anywhere yet"}},
		{name: "spec.admission false and unsupported: Unsupported", policy: load(t, "unsupported-background-only.yaml"), snapshot: snapshot(t, load(t, "unsupported-background-only.yaml")),
			wantDecided: true, want: Verdict{Generation: 1, Reason: "Unsupported", Message: "spec.rules[0].validate.assert: validate.assert is not supported by charter anywhere yet"}},
		{name: "spec.admission false, not in the snapshot yet: wait", policy: load(t, "background-only-bad.yaml"), snapshot: snapshot(t)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, decided := Decide(tc.policy, tc.snapshot)
			if decided != tc.wantDecided {
				t.Fatalf("decided = %v, want %v (verdict %+v)", decided, tc.wantDecided, got)
			}
			if tc.wantMessage != "" {
				if !strings.Contains(got.Message, tc.wantMessage) {
					t.Errorf("message %q does not name %q", got.Message, tc.wantMessage)
				}
				got.Message = ""
			}
			if got != tc.want {
				t.Errorf("verdict %+v, want %+v", got, tc.want)
			}
		})
	}
}

func readyCondition(t *testing.T, st *kyvernov1.PolicyStatus) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(st.Conditions, kyvernov1.PolicyConditionReady)
	if c == nil {
		t.Fatalf("no Ready condition in %+v", st)
	}
	return *c
}

func TestDesiredShape(t *testing.T) {
	p := load(t, "require-labels.yaml").(kyvernov1.StatusHolder)
	st := Desired(p, Verdict{Ready: true, Generation: 1, Message: MessageReady})
	c := readyCondition(t, st)
	if c.Status != metav1.ConditionTrue || c.Reason != "Succeeded" || c.Message != "Ready" || c.ObservedGeneration != 1 || c.LastTransitionTime.IsZero() {
		t.Errorf("Ready condition %+v", c)
	}
	if st.Ready != nil {
		t.Errorf("deprecated status.ready = %v, want cleared", *st.Ready)
	}
	var names []string
	for _, r := range st.Autogen.Rules {
		names = append(names, r.Name)
	}
	if strings.Join(names, ",") != "autogen-check-for-labels,autogen-cronjob-check-for-labels" {
		t.Errorf("autogen rules %v", names)
	}
	if st.RuleCount != (kyvernov1.RuleCountStatus{Validate: 1}) {
		t.Errorf("rulecount %+v", st.RuleCount)
	}

	// kubectl get cpol's ADMISSION and BACKGROUND columns read these:
	// the spec's settings with their defaults, set for every policy.
	if st.Admission == nil || !*st.Admission || st.Background == nil || !*st.Background {
		t.Errorf("admission %v, background %v; want true, true (both defaulted)", st.Admission, st.Background)
	}
	if p.GetSpec().Admission != nil || p.GetSpec().Background != nil {
		t.Errorf("Desired wrote the defaults into spec: admission %v, background %v", p.GetSpec().Admission, p.GetSpec().Background)
	}
	if bg := Desired(load(t, "background-only.yaml").(kyvernov1.StatusHolder), Verdict{Ready: true, Generation: 1}); bg.Admission == nil || *bg.Admission || bg.Background == nil || !*bg.Background {
		t.Errorf("admission: false policy: admission %v, background %v; want false, true", bg.Admission, bg.Background)
	}

	// A MutatingPolicy that only mutates existing resources is served at
	// admission to see its triggers, but mutates nothing there.
	existing := load(t, "mpol-mutate-existing-only.yaml")
	if !existing.GetSpec().AdmissionProcessingEnabled() {
		t.Fatal("the mutate-existing MutatingPolicy is not served at admission: the case below tests nothing")
	}
	if st := DesiredPolicyStatus(existing.(policiesv1.StatusHolder), Verdict{Ready: true, Generation: 1}); st.Admission == nil || *st.Admission || st.Background == nil || !*st.Background {
		t.Errorf("mutate-existing-only MutatingPolicy: admission %v, background %v; want false, true", st.Admission, st.Background)
	}

	team := Desired(load(t, "team-policy.yaml").(kyvernov1.StatusHolder), Verdict{Ready: true, Generation: 2, Message: MessageReady})
	if team.RuleCount != (kyvernov1.RuleCountStatus{Validate: 1, Mutate: 1}) || len(team.Autogen.Rules) != 0 {
		t.Errorf("ConfigMap policy: rulecount %+v, autogen %d rules", team.RuleCount, len(team.Autogen.Rules))
	}

	bad := Desired(load(t, "bad-anchor.yaml").(kyvernov1.StatusHolder), Verdict{Generation: 1, Message: "spec.rules[0]: x"})
	if c := readyCondition(t, bad); c.Status != metav1.ConditionFalse || c.Reason != "Failed" || c.Message != "spec.rules[0]: x" {
		t.Errorf("not-ready condition %+v", c)
	}

	unsupported := Desired(load(t, "assert-audit.yaml").(kyvernov1.StatusHolder), Verdict{Generation: 1, Reason: kyvernov1.PolicyReasonUnsupported, Message: "spec.rules[0].context[0]: y"})
	if c := readyCondition(t, unsupported); c.Status != metav1.ConditionFalse || c.Reason != "Unsupported" || c.Message != "spec.rules[0].context[0]: y" {
		t.Errorf("unsupported condition %+v", c)
	}
}

func TestDesiredKeepsWhatCharterDoesNotOwn(t *testing.T) {
	p := load(t, "require-labels.yaml").(kyvernov1.StatusHolder)
	ready := true
	p.GetStatus().Ready = &ready
	p.GetStatus().ValidatingAdmissionPolicy = kyvernov1.ValidatingAdmissionPolicyStatus{Generated: false, Message: "not generated"}
	p.GetStatus().Conditions = []metav1.Condition{{Type: "Other", Status: metav1.ConditionTrue, Reason: "X", LastTransitionTime: metav1.Now()}}
	st := Desired(p, Verdict{Ready: true, Generation: 1, Message: MessageReady})
	if st.ValidatingAdmissionPolicy.Message != "not generated" || meta.FindStatusCondition(st.Conditions, "Other") == nil {
		t.Errorf("lost fields charter does not own: %+v", st)
	}
	if !Changed(p.GetStatus(), st) {
		t.Error("clearing status.ready is a change")
	}
}

// TestChangeDetection walks a policy through the writes the controller
// would make: each change is seen once, and what the API server hands
// back never looks like a change (no write loops).
func TestChangeDetection(t *testing.T) {
	p := load(t, "require-labels.yaml").(kyvernov1.StatusHolder)
	ready := Verdict{Ready: true, Generation: 1, Message: MessageReady}

	first := Desired(p, ready)
	if !Changed(p.GetStatus(), first) {
		t.Fatal("an empty status needs a write")
	}
	stored := roundTrip(t, first)
	*p.GetStatus() = *stored
	if again := Desired(p, ready); Changed(p.GetStatus(), again) {
		t.Fatalf("the same verdict on the stored status is a change:\nstored  %+v\ndesired %+v", p.GetStatus(), again)
	}

	// A failed generation flips the condition and moves its transition time.
	time.Sleep(1100 * time.Millisecond) // metav1.Time is stored to the second
	failed := Desired(p, Verdict{Generation: 2, Message: "spec.rules[0]: bad"})
	if !Changed(p.GetStatus(), failed) {
		t.Fatal("ready to not ready is no change")
	}
	before, after := readyCondition(t, p.GetStatus()), readyCondition(t, failed)
	if !after.LastTransitionTime.After(before.LastTransitionTime.Time) {
		t.Errorf("lastTransitionTime did not move on a flip: %v -> %v", before.LastTransitionTime, after.LastTransitionTime)
	}

	// A new generation that stays ready updates observedGeneration only.
	*p.GetStatus() = *roundTrip(t, first)
	next := Desired(p, Verdict{Ready: true, Generation: 2, Message: MessageReady})
	if !Changed(p.GetStatus(), next) {
		t.Fatal("a new observedGeneration is no change")
	}
	if c := readyCondition(t, next); !c.LastTransitionTime.Equal(&before.LastTransitionTime) {
		t.Errorf("lastTransitionTime moved without a flip: %v -> %v", before.LastTransitionTime, c.LastTransitionTime)
	}
}

// roundTrip is what a write and a read through the API server do to a
// status: JSON out and back.
func roundTrip(t *testing.T, st *kyvernov1.PolicyStatus) *kyvernov1.PolicyStatus {
	t.Helper()
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var out kyvernov1.PolicyStatus
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestFaultMessage(t *testing.T) {
	p := load(t, "bad-anchor.yaml")
	second := *p.GetSpec().Rules[0].DeepCopy()
	second.Name = "r2"
	p.GetSpec().Rules = append(p.GetSpec().Rules, second)
	v, ok := Decide(p, snapshot(t, p))
	if !ok || v.Ready {
		t.Fatalf("verdict %+v, %v", v, ok)
	}
	// Every fault, by field path, without the policy's own name.
	for _, want := range []string{`spec.rules[0].validate.pattern.spec.containers[0]: unknown anchor "~(x)"`, `spec.rules[1].validate.pattern.spec.containers[0]: unknown anchor "~(x)"`} {
		if !strings.Contains(v.Message, want) {
			t.Errorf("message %q lacks %q", v.Message, want)
		}
	}
	if strings.Contains(v.Message, `ClusterPolicy "bad-anchor"`) {
		t.Errorf("message %q repeats the policy name", v.Message)
	}
}

// A ClusterPolicy and a ValidatingPolicy of one name share a key, not an
// ID: both are served and ready, whatever the informers' order.
func TestDecideSameNameDifferentKinds(t *testing.T) {
	cp := load(t, "require-labels.yaml").(kyvernov1.StatusHolder)
	var vp policiesv1.ValidatingPolicy
	if err := yaml.UnmarshalStrict([]byte(`
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: `+cp.GetName()+`, generation: 4}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: "true"
`), &vp); err != nil {
		t.Fatal(err)
	}
	for _, order := range [][]kyvernov1.PolicyInterface{{cp, &vp}, {&vp, cp}} {
		s := snapshot(t, order...)
		got, decided := Decide(cp, s)
		if !decided || !got.Ready {
			t.Errorf("ClusterPolicy: decided %v, verdict %+v; want ready", decided, got)
		}
		got, decided = Decide(&vp, s)
		want := Verdict{Ready: true, Generation: 4, Message: MessageReady}
		if !decided || got != want {
			t.Errorf("ValidatingPolicy: decided %v, verdict %+v; want %+v", decided, got, want)
		}
	}
}

// TestDesiredPolicyStatus: a policies.kyverno.io policy gets Kyverno's
// status.conditionStatus, ready only while every condition is True, each
// condition about the verdict's generation, and its autogen copies in
// status.autogen.configs.
func TestDesiredPolicyStatus(t *testing.T) {
	p := load(t, "vpol-pods.yaml").(policiesv1.StatusHolder)
	cond := func(st *policiesv1.PolicyStatus, typ string) *metav1.Condition {
		return meta.FindStatusCondition(st.ConditionStatus.Conditions, typ)
	}

	ready := DesiredPolicyStatus(p, Verdict{Ready: true, Generation: 2, Message: MessageReady})
	cs := ready.ConditionStatus
	if !cs.IsReady() || cs.Message != "" || !cs.ReadyAt(2) {
		t.Errorf("served: conditionStatus %+v, want ready at generation 2 with no message", cs)
	}
	if c := cond(ready, policiesv1.ConditionWebhookConfigured); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Succeeded" || c.Message != MessageWebhookConfigured || c.ObservedGeneration != 2 {
		t.Errorf("served: WebhookConfigured condition %+v", c)
	}
	// Served: Kyverno's conditions only (its e2e tests count them).
	if c := cond(ready, policiesv1.ConditionPolicyCached); c != nil {
		t.Errorf("served: PolicyCached %+v, want none", c)
	}
	if len(ready.Autogen.Configs) != 2 {
		t.Fatalf("autogen configs %v, want defaults and cronjobs", ready.Autogen.Configs)
	}
	var kinds []string
	for _, name := range []string{"defaults", "cronjobs"} {
		c := ready.Autogen.Configs[name]
		for _, tg := range c.Targets {
			kinds = append(kinds, tg.Kind)
		}
		if c.Spec == nil || !strings.Contains(string(c.Spec.Raw), "object.spec.") {
			t.Errorf("autogen %s spec %v: want the validations read under the Pod template", name, c.Spec)
		}
	}
	if got := strings.Join(kinds, ","); got != "DaemonSet,Deployment,ReplicaSet,StatefulSet,Job,CronJob" {
		t.Errorf("autogen targets %s", got)
	}

	// Not served: not ready, PolicyCached False with charter's reason and
	// message, which conditionStatus.message repeats; WebhookConfigured
	// goes, so the first False condition is charter's reason.
	*p.GetStatus() = *roundTripStatus(t, ready)
	refused := DesiredPolicyStatus(p, Verdict{Generation: 3, Reason: kyvernov1.PolicyReasonUnsupported, Message: "spec.validations[0].expression: x"})
	cs = refused.ConditionStatus
	if cs.IsReady() || cs.Ready == nil || cs.Message != "spec.validations[0].expression: x" {
		t.Errorf("refused: conditionStatus %+v, want not ready with charter's message", cs)
	}
	if c := cond(refused, policiesv1.ConditionPolicyCached); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Unsupported" || c.ObservedGeneration != 3 {
		t.Errorf("refused: PolicyCached %+v", c)
	}
	if c := cond(refused, policiesv1.ConditionWebhookConfigured); c != nil {
		t.Errorf("refused: WebhookConfigured kept: %+v", c)
	}
	if !Changed(p.GetStatus(), refused) {
		t.Error("ready to refused is no change")
	}

	// A condition the background controller wrote stays, counts in ready
	// and message, and is restated for the new generation.
	*p.GetStatus() = *roundTripStatus(t, ready)
	conditions.SetSummarized(&p.GetStatus().ConditionStatus, 2, policiesv1.ConditionRBACPermissionsGranted, metav1.ConditionFalse,
		"Forbidden", "may not create ConfigMap")
	next := DesiredPolicyStatus(p, Verdict{Ready: true, Generation: 4, Message: MessageReady})
	if c := cond(next, policiesv1.ConditionRBACPermissionsGranted); c == nil || c.ObservedGeneration != 4 || c.Status != metav1.ConditionFalse {
		t.Errorf("background condition %+v, want kept at generation 4", c)
	}
	if next.ConditionStatus.IsReady() || next.ConditionStatus.Message != "may not create ConfigMap" {
		t.Errorf("with a False RBACPermissionsGranted: conditionStatus %+v, want not ready naming it", next.ConditionStatus)
	}

	// What the API server hands back is no change: no write loop.
	*p.GetStatus() = *roundTripStatus(t, ready)
	if again := DesiredPolicyStatus(p, Verdict{Ready: true, Generation: 2, Message: MessageReady}); Changed(p.GetStatus(), again) {
		t.Errorf("the same verdict on the stored status is a change:\nstored  %+v\ndesired %+v", p.GetStatus(), again)
	}
}

// roundTripStatus is st as the API server stores and returns it.
func roundTripStatus(t *testing.T, st *policiesv1.PolicyStatus) *policiesv1.PolicyStatus {
	t.Helper()
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var out policiesv1.PolicyStatus
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// TestAutogenStatusShape: status.autogen as Kyverno writes it (its
// chainsaw tests validating-policies/autogen/*): each copy's spec keeps
// the policy's spec.autogen, and a policy with no copies still has
// status.autogen, empty.
func TestAutogenStatusShape(t *testing.T) {
	p := load(t, "vpol-autogen-deployments-cronjobs.yaml").(policiesv1.StatusHolder)
	st := DesiredPolicyStatus(p, Verdict{Ready: true, Generation: 1})
	if len(st.Autogen.Configs) != 2 {
		t.Fatalf("configs %v, want defaults and cronjobs", st.Autogen.Configs)
	}
	for name, c := range st.Autogen.Configs {
		var spec struct {
			Autogen struct {
				PodControllers struct {
					Controllers []string `json:"controllers"`
				} `json:"podControllers"`
			} `json:"autogen"`
		}
		if err := json.Unmarshal(c.Spec.Raw, &spec); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(spec.Autogen.PodControllers.Controllers, ","); got != "deployments,cronjobs" {
			t.Errorf("configs.%s.spec.autogen.podControllers.controllers = %q, want the policy's", name, got)
		}
	}

	none := load(t, "vpol-autogen-none.yaml").(policiesv1.StatusHolder)
	data, err := json.Marshal(DesiredPolicyStatus(none, Verdict{Ready: true, Generation: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"autogen":{}`) {
		t.Errorf("status without copies: %s, want \"autogen\":{}", data)
	}
}

// TestImageValidatingPolicyAutogenValidationConfigurations: each autogen
// copy of an ImageValidatingPolicy publishes the validationConfigurations
// charter acts on, the defaults filled in, as Kyverno's copies carry its
// CRD's defaults (chainsaw image-validating-policies/autogen/
// should-autogen); the policy's own spec is left as applied.
func TestImageValidatingPolicyAutogenValidationConfigurations(t *testing.T) {
	p := load(t, "ivpol-autogen.yaml").(*policiesv1.ImageValidatingPolicy)
	st := DesiredPolicyStatus(p, Verdict{Ready: true, Generation: 1})
	if len(st.Autogen.Configs) == 0 {
		t.Fatal("no autogen copies")
	}
	for name, c := range st.Autogen.Configs {
		var spec struct {
			ValidationConfigurations map[string]bool `json:"validationConfigurations"`
		}
		if err := json.Unmarshal(c.Spec.Raw, &spec); err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{"mutateDigest": false, "verifyDigest": true, "required": true}
		if !maps.Equal(spec.ValidationConfigurations, want) {
			t.Errorf("configs.%s.spec.validationConfigurations = %v, want %v", name, spec.ValidationConfigurations, want)
		}
	}
	if vc := p.Spec.ValidationConfigurations; vc == nil || vc.VerifyDigest != nil || vc.Required != nil {
		t.Errorf("the policy's spec.validationConfigurations became %+v", vc)
	}
}
