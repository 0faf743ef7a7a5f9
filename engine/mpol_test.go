package engine

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/webhookrules"
)

// TestMutatingPolicies covers the MutatingPolicy pipeline
// (cel-policy-types.md §3.3.2, §3.4): ApplyConfiguration and JSONPatch
// mutations in order, variables visible in matchConditions, chaining
// across policies, a failed JSONPatch test op, patch errors, the atomic
// field check of ApplyConfiguration, autogen for Pod controllers and the
// scope of a NamespacedMutatingPolicy.
func TestMutatingPolicies(t *testing.T) {
	policies, _ := readCELPolicies(t, "mpol/policies.yaml")
	set, err := Compile(policies)
	if err != nil {
		t.Fatal(err)
	}
	configMap := func(ns string, data map[string]any) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": ns}, "data": data}
	}
	type result struct{ status, message string }
	tests := []struct {
		name   string
		object map[string]any
		want   map[string]result // by policy key; a policy not listed must not respond
		// patched is the final object, as JSON.
		patched string
	}{{
		name:   "pod: both mutations, then the next policies on the result",
		object: pod("default", "web", nil, "nginx"),
		want: map[string]result{
			"add-team-label": {"pass", "success"},
			"pull-always":    {"pass", "success"},
			"node-selector":  {"pass", "success"},
		},
		patched: `{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"owner":"platform"},"labels":{"pool":"general","team":"platform"},"name":"web","namespace":"default"},"spec":{"containers":[{"image":"nginx","imagePullPolicy":"Always","name":"c"}],"priorityClassName":"general"}}`,
	}, {
		name:   "pod: a matchCondition on a variable skips, the next policy does not match",
		object: pod("default", "web", map[string]any{"team": "skip-me"}, "nginx"),
		want: map[string]result{
			"add-team-label": {"skip", "skip"},
			"pull-always":    {"pass", "success"},
			"node-selector":  {"pass", "success"},
		},
		patched: `{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"pool":"general","team":"skip-me"},"name":"web","namespace":"default"},"spec":{"containers":[{"image":"nginx","imagePullPolicy":"Always","name":"c"}],"priorityClassName":"general"}}`,
	}, {
		name:   "configmap: a failed test op is no error; an escaped key",
		object: configMap("default", map[string]any{"mode": "lax"}),
		want: map[string]result{
			"configmap-patches": {"pass", "success"},
		},
		patched: `{"apiVersion":"v1","data":{"a/b":"c","mode":"lax"},"kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}`,
	}, {
		name:   "configmap in team-a: the namespaced policy acts in its namespace",
		object: configMap("team-a", map[string]any{"mode": "strict"}),
		want: map[string]result{
			"configmap-patches":  {"pass", "success"},
			"team-a/team-a-only": {"pass", "success"},
		},
		patched: `{"apiVersion":"v1","data":{"a/b":"c","mode":"strict","tested":"yes"},"kind":"ConfigMap","metadata":{"labels":{"tenant":"team-a"},"name":"c","namespace":"team-a"}}`,
	}, {
		name:   "configmap: a JSON Patch error leaves the object as it was",
		object: configMap("default", map[string]any{"remove": "yes"}),
		want: map[string]result{
			"configmap-patches": {"error", "failed to evaluate policy: JSON Patch: "},
		},
		patched: `{"apiVersion":"v1","data":{"remove":"yes"},"kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}`,
	}, {
		name: "service: merging into an atomic map is refused",
		object: map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "s", "namespace": "default"},
			"spec": map[string]any{"selector": map[string]any{"tier": "front"}}},
		want: map[string]result{
			"service-selector": {"error", "failed to evaluate policy: error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.selector"},
		},
		patched: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","namespace":"default"},"spec":{"selector":{"tier":"front"}}}`,
	}, {
		name: "deployment: the autogen copy mutates the Pod template",
		object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "d", "namespace": "default"},
			"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "d"}}, "template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "d"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}}}}},
		want: map[string]result{
			// add-team-label has a JSONPatch: no autogen copy.
			"pull-always":   {"skip", "skip"},
			"node-selector": {"pass", "success"},
		},
		patched: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"default"},"spec":{"selector":{"matchLabels":{"app":"d"}},"template":{"metadata":{"labels":{"app":"d","pool":"general"}},"spec":{"containers":[{"image":"nginx","name":"c"}],"priorityClassName":"general"}}}}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &review.Request{Operation: kyvernov1.Create, Object: tt.object}
			before, _ := json.Marshal(tt.object)
			resp := set.Mutate(context.Background(), req)
			got := map[string]result{}
			for _, pr := range resp.Policies {
				if len(pr.Rules) != 1 || pr.Rules[0].Name != "" || pr.Rules[0].Type != review.TypeMutation {
					t.Fatalf("%s: want one mutation result with rule \"\", got %+v", pr.Key, pr.Rules)
				}
				got[pr.Key] = result{string(pr.Rules[0].Status), pr.Rules[0].Message}
			}
			for key, w := range tt.want {
				g, ok := got[key]
				if !ok || g.status != w.status || !strings.HasPrefix(g.message, w.message) {
					t.Errorf("%s: got %+v, want %+v", key, g, w)
				}
			}
			for key, g := range got {
				if _, ok := tt.want[key]; !ok {
					t.Errorf("%s: unexpected result %+v", key, g)
				}
			}
			out, _ := json.Marshal(resp.Object)
			if string(out) != tt.patched {
				t.Errorf("patched:\n got %s\nwant %s", out, tt.patched)
			}
			if after, _ := json.Marshal(tt.object); string(after) != string(before) {
				t.Errorf("the request's object was changed in place: %s", after)
			}
			if string(out) != string(before) && len(resp.Patch) == 0 {
				t.Error("the object changed but the response has no patch")
			}
		})
	}
}

// TestMutatingPolicyFaults checks that a MutatingPolicy charter cannot
// run is refused with the field at fault.
func TestMutatingPolicyFaults(t *testing.T) {
	policies, _ := readCELPolicies(t, "mpol/faults.yaml")
	for _, p := range policies {
		want := p.GetAnnotations()["fault"]
		_, err := Compile([]kyvernov1.PolicyInterface{p})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", p.GetName(), err, want)
		}
	}
}

// TestMutatingPolicyReinvocation: a policy with reinvocationPolicy
// IfNeeded runs again when a later policy changed the object it left, and
// its second response is the one reported; with Never it is not.
func TestMutatingPolicyReinvocation(t *testing.T) {
	for _, policy := range []string{"IfNeeded", "Never"} {
		t.Run(policy, func(t *testing.T) {
			policies, _ := readCELPolicies(t, "mpol/reinvocation.yaml")
			policies[0].(*policiesv1.MutatingPolicy).Spec.ReinvocationPolicy = admissionregistrationv1.ReinvocationPolicyType(policy)
			set, err := Compile(policies)
			if err != nil {
				t.Fatal(err)
			}
			cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "default"}}
			resp := set.Mutate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: cm})
			want := map[string]any{"IfNeeded": "gold", "Never": "none"}[policy]
			meta := resp.Object["metadata"].(map[string]any)
			if got := meta["annotations"].(map[string]any)["tier"]; got != want {
				t.Errorf("annotation tier = %v, want %v (object %v)", got, want, resp.Object)
			}
			if len(resp.Policies) != 2 || resp.Policies[0].Key != "copy-tier" || resp.Policies[0].Rules[0].Status != review.StatusPass {
				t.Fatalf("responses: %+v", resp.Policies)
			}
			if got := resp.Policies[0].Patched["metadata"].(map[string]any)["annotations"].(map[string]any)["tier"]; got != want {
				t.Errorf("copy-tier's reported patched object has tier %v, want %v", got, want)
			}
		})
	}
}

// TestMutatingPolicyScan: under WithMutationScan, Validate reports each
// MutatingPolicy on an existing object as Kyverno's background scan does
// (cel-policy-types.md §3.3.2): fail "mutation is not applied" when the
// policy would still change it, pass "success" when it carries the
// mutation already, skip when a matchCondition does not hold, errors as
// at admission. Each policy is judged on the object as stored, not on an
// earlier policy's result; without the option MutatingPolicies give
// Validate nothing.
func TestMutatingPolicyScan(t *testing.T) {
	policies, _ := readCELPolicies(t, "mpol/policies.yaml")
	set, err := Compile(policies)
	if err != nil {
		t.Fatal(err)
	}
	mutated := pod("default", "web", map[string]any{"team": "platform", "pool": "general"}, "nginx")
	meta := mutated["metadata"].(map[string]any)
	meta["annotations"] = map[string]any{"owner": "platform"}
	spec := mutated["spec"].(map[string]any)
	spec["priorityClassName"] = "general"
	spec["containers"].([]any)[0].(map[string]any)["imagePullPolicy"] = "Always"
	type result struct{ status, message string }
	tests := []struct {
		name   string
		object map[string]any
		want   map[string]result // by policy key; a policy not listed must not respond
	}{{
		name:   "a pod created before the policies: every mutation is missing",
		object: pod("default", "web", nil, "nginx"),
		want: map[string]result{
			"add-team-label": {"fail", "mutation is not applied"},
			// Judged on the stored object: no team label, so it skips
			// (at admission it saw add-team-label's result).
			"pull-always":   {"skip", "skip"},
			"node-selector": {"fail", "mutation is not applied"},
		},
	}, {
		name:   "a pod that carries every mutation passes",
		object: mutated,
		want: map[string]result{
			"add-team-label": {"pass", "success"},
			"pull-always":    {"pass", "success"},
			"node-selector":  {"skip", "skip"},
		},
	}, {
		name: "an error is reported as at admission",
		object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "default"},
			"data": map[string]any{"remove": "yes"}},
		want: map[string]result{
			"configmap-patches": {"error", "failed to evaluate policy: JSON Patch: "},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := json.Marshal(tt.object)
			req := &review.Request{Operation: kyvernov1.Create, Object: tt.object}
			if resp := set.Validate(context.Background(), req); len(resp.Policies) != 0 {
				t.Errorf("without WithMutationScan: got %+v, want no responses", resp.Policies)
			}
			resp := set.Validate(context.Background(), req, WithMutationScan())
			got := map[string]result{}
			for _, pr := range resp.Policies {
				if len(pr.Rules) != 1 || pr.Rules[0].Type != review.TypeValidation {
					t.Fatalf("%s: want one validation result, got %+v", pr.Key, pr.Rules)
				}
				if pr.Patched != nil {
					t.Errorf("%s: a scan result carries a patched object", pr.Key)
				}
				got[pr.Key] = result{string(pr.Rules[0].Status), pr.Rules[0].Message}
			}
			for key, w := range tt.want {
				if g, ok := got[key]; !ok || g.status != w.status || !strings.HasPrefix(g.message, w.message) {
					t.Errorf("%s: got %+v, want %+v", key, g, w)
				}
			}
			for key, g := range got {
				if _, ok := tt.want[key]; !ok {
					t.Errorf("%s: unexpected result %+v", key, g)
				}
			}
			if after, _ := json.Marshal(tt.object); string(after) != string(before) {
				t.Errorf("the scan changed the object in place: %s", after)
			}
		})
	}
}

// TestMutatingPolicyScanTargets: the background scan checks a
// mutate-existing policy's targets too (those its target rules select;
// its admission rules select none of them): a target without the
// mutation fails "mutation is not applied", one with it passes "success",
// an object the target rules do not select gets no result. The scan
// answered for the trigger kinds only, so Kyverno's
// mutating-policies/reporting/existing-admission-flow found no report for
// the target. webhookrules.MutatingPolicyScan names the target resources for the
// scan to list.
func TestMutatingPolicyScanTargets(t *testing.T) {
	policies, _ := readCELPolicies(t, "mpol/existing-scan.yaml")
	set, err := Compile(policies)
	if err != nil {
		t.Fatal(err)
	}
	cm := func(ns string, labels map[string]any) map[string]any {
		meta := map[string]any{"name": "settings", "namespace": ns}
		if labels != nil {
			meta["labels"] = labels
		}
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
	}
	for _, tc := range []struct {
		name   string
		object map[string]any
		want   []string
	}{
		{name: "a target without the mutation", object: cm("team-a", nil), want: []string{"fail: mutation is not applied"}},
		{name: "a target with the mutation", object: cm("team-a", map[string]any{"foo": "bar"}), want: []string{"pass: success"}},
		{name: "not a target", object: cm("team-b", nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := set.Validate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: tc.object}, WithMutationScan())
			var got []string
			for _, pr := range resp.Policies {
				for _, rr := range pr.Rules {
					got = append(got, string(rr.Status)+": "+rr.Message)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("results %q, want %q", got, tc.want)
			}
		})
	}
	rules := webhookrules.MutatingPolicyScan(policies[0])
	if len(rules) != 2 || rules[0].Resources[0] != "namespaces" || rules[1].Resources[0] != "configmaps" {
		t.Errorf("webhookrules.MutatingPolicyScan = %+v, want the namespaces rule and the configmaps target rule", rules)
	}
}
