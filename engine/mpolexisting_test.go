package engine

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/match"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/webhookrules"
)

// objectStore serves resource.* and mutate-existing targets from the
// objects of a testdata file, as the API server would: a namespace
// filter applies to namespaced objects only.
type objectStore []map[string]any

func readObjectStore(t *testing.T, file string) objectStore {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var out objectStore
	for _, doc := range splitYAML(data) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		out = append(out, obj)
	}
	return out
}

func (s objectStore) Resource(_ context.Context, apiVersion, resource, namespace, name string) (map[string]any, error) {
	for _, o := range s {
		ref := review.RefOf(o)
		if ref.APIVersion == apiVersion && match.ResourceForKind(ref.Kind) == resource && ref.Namespace == namespace && ref.Name == name {
			return o, nil
		}
	}
	return nil, nil
}

func (s objectStore) Resources(_ context.Context, apiVersion, resource, namespace string) ([]map[string]any, error) {
	var out []map[string]any
	for _, o := range s {
		ref := review.RefOf(o)
		if ref.APIVersion == apiVersion && match.ResourceForKind(ref.Kind) == resource && (namespace == "" || ref.Namespace == "" || ref.Namespace == namespace) {
			out = append(out, o)
		}
	}
	return out, nil
}

// TestMutatingPolicyMutateExisting covers a MutatingPolicy with
// evaluation.mutateExisting (cel-policy-types.md §3.3.2): admission's
// background check (one pass response per selected trigger, under the
// policy's synthetic rule), and the background controller's run: targets
// from targetMatchConstraints' resource rules and selectors, from its
// expression, or from matchConstraints without a target spec; each
// evaluated as an UPDATE of itself under targetMatchConditions (else
// matchConditions); unchanged targets not returned for writing; a
// namespaced policy's targets outside its namespace refused.
func TestMutatingPolicyMutateExisting(t *testing.T) {
	policies, _ := readCELPolicies(t, "mpol/existing.yaml")
	set, err := Compile(policies)
	if err != nil {
		t.Fatal(err)
	}
	store := readObjectStore(t, "mpol/existing-cluster.yaml")
	object := func(apiVersion, kind, ns, name string, labels map[string]any) map[string]any {
		meta := map[string]any{"name": name}
		if ns != "" {
			meta["namespace"] = ns
		}
		if labels != nil {
			meta["labels"] = labels
		}
		return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
	}
	trigger := object("v1", "ConfigMap", "default", "trigger", map[string]any{"trigger": "yes"})
	// result is "status: message" of one response, keyed by
	// "policy/rule target"; patched says whether the target came back for
	// writing, with its new labels and annotations.
	type result struct {
		status, message string
		patched         string
	}
	tests := []struct {
		name   string
		op     kyvernov1.AdmissionOperation
		object map[string]any
		checks bool
		want   map[string]result
	}{{
		name: "admission check: a selected trigger is one pass under the policy's rule", op: kyvernov1.Create, object: trigger, checks: true,
		want: map[string]result{"roll-label/roll-label": {status: "pass", message: "success"}},
	}, {
		name: "admission check: matchConstraints' operations decide", op: kyvernov1.Update, object: trigger, checks: true,
		want: map[string]result{},
	}, {
		name: "admission check: objectSelector decides", op: kyvernov1.Create, object: object("v1", "ConfigMap", "default", "plain", nil), checks: true,
		want: map[string]result{},
	}, {
		name: "admission check: a false matchCondition creates nothing", op: kyvernov1.Update, object: object("v1", "Namespace", "", "kube-system", nil), checks: true,
		want: map[string]result{},
	}, {
		name: "targets by resource rules, objectSelector and targetMatchConditions, whatever the trigger's operation", op: kyvernov1.Update, object: trigger,
		want: map[string]result{
			"roll-label/roll-label ConfigMap default/a":     {status: "pass", message: "success", patched: "labels map[rolled:v2]"},
			"roll-label/roll-label ConfigMap default/b":     {status: "pass", message: "success"},
			"roll-label/roll-label ConfigMap kube-system/k": {status: "skip", message: "skip"},
			"roll-label/roll-label ConfigMap team-a/t1":     {status: "pass", message: "success", patched: "labels map[rolled:v2]"},
			"roll-label/roll-label ConfigMap team-b/t2":     {status: "pass", message: "success", patched: "labels map[rolled:v2]"},
		},
	}, {
		name: "no target spec: matchConstraints' resources under matchConditions, and the admission response", op: kyvernov1.Update,
		object: object("v1", "Namespace", "", "team-a", map[string]any{"kubernetes.io/metadata.name": "team-a"}),
		want: map[string]result{
			"label-namespaces/": {status: "pass", message: "success"},
			"label-namespaces/label-namespaces Namespace default":     {status: "pass", message: "success", patched: "labels map[example.com/privileged:true kubernetes.io/metadata.name:default]"},
			"label-namespaces/label-namespaces Namespace kube-system": {status: "skip", message: "skip"},
			"label-namespaces/label-namespaces Namespace team-a":      {status: "pass", message: "success", patched: "labels map[example.com/privileged:true kubernetes.io/metadata.name:team-a]"},
		},
	}, {
		name: "targets from the expression, read again", op: kyvernov1.Create, object: object("v1", "Secret", "team-a", "s", nil),
		want: map[string]result{
			"pick-by-expression/pick-by-expression ConfigMap team-a/t1": {status: "pass", message: "success", patched: "annotations map[picked-by:secret]"},
		},
	}, {
		name: "a namespaced policy: its namespace's targets; a cluster-scoped one refused", op: kyvernov1.Create, object: object("v1", "ServiceAccount", "team-a", "sa", nil),
		want: map[string]result{
			"team-a/tenant/tenant ConfigMap team-a/t1":               {status: "pass", message: "success", patched: "labels map[tenant:team-a]"},
			"team-a/tenant/tenant Widget w1":                         {status: "error", message: `a namespaced policy cannot mutate the cluster scope; it acts in namespace "team-a" only`},
			"team-a/tenant-escape/tenant-escape ConfigMap team-b/t2": {status: "error", message: `a namespaced policy can only mutate its own namespace "team-a", not "team-b"`},
		},
	}, {
		name: "targets by namespaceSelector, less excludeResourceRules", op: kyvernov1.Create, object: object("v1", "LimitRange", "team-b", "l", nil),
		want: map[string]result{
			"by-namespace/by-namespace ConfigMap default/b":      {status: "pass", message: "success", patched: "labels map[gold:yes rolled:v2]"},
			"by-namespace/by-namespace ConfigMap default/frozen": {status: "pass", message: "success", patched: "labels map[frozen:true gold:yes]"},
		},
	}, {
		name: "a namespaced policy ignores another namespace's trigger", op: kyvernov1.Create, object: object("v1", "ServiceAccount", "team-b", "sa", nil),
		want: map[string]result{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []EvalOption{WithMutateExisting(), WithLoaders(loader.Loaders{Resources: store, Namespaces: nsLabels{"default": {"tier": "gold"}}})}
			if tt.checks {
				opts = append(opts, WithBackgroundChecks())
			}
			resp := set.Mutate(context.Background(), &review.Request{Operation: tt.op, Object: tt.object, OldObject: tt.object}, opts...)
			got := map[string]result{}
			for _, pr := range resp.Policies {
				for _, rr := range pr.Rules {
					key := pr.Key + "/" + rr.Name
					if t := rr.Target; t != nil {
						name := t.Name
						if t.Namespace != "" {
							name = t.Namespace + "/" + name
						}
						key += " " + t.Kind + " " + name
					}
					r := result{status: string(rr.Status), message: rr.Message}
					if rr.PatchedTarget != nil {
						meta := rr.PatchedTarget["metadata"].(map[string]any)
						field := "labels"
						if strings.HasPrefix(key, "pick-by") {
							field = "annotations"
						}
						r.patched = field + " " + fmtMap(meta[field])
					}
					if _, dup := got[key]; dup {
						t.Errorf("two responses for %s", key)
					}
					got[key] = r
				}
			}
			for key, w := range tt.want {
				if g, ok := got[key]; !ok || g != w {
					t.Errorf("%s:\n got %+v\nwant %+v", key, g, w)
				}
			}
			for key, g := range got {
				if _, ok := tt.want[key]; !ok {
					t.Errorf("%s: unexpected response %+v", key, g)
				}
			}
		})
	}
	// The store's objects are read, never changed in place.
	for _, o := range store {
		if meta := o["metadata"].(map[string]any); meta["name"] == "a" && meta["labels"] != nil {
			t.Errorf("target changed in place: %v", o)
		}
	}
}

// fmtMap prints a map[string]any with sorted keys, as %v would.
func fmtMap(v any) string {
	m, _ := v.(map[string]any)
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	b.WriteString("map[")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(k + ":")
		if s, ok := m[k].(string); ok {
			b.WriteString(s)
		}
	}
	b.WriteString("]")
	return b.String()
}

// TestMutatingPolicyMutateExistingRule: in ClusterPolicy terms a
// mutate-existing MutatingPolicy has one mutate-existing rule named after
// it, which UpdateRequests and the background controller key their work
// by; it runs on policy events (creation and changes), names DELETE only when
// matchConstraints do, and carries skipBackgroundRequests. It is served
// at admission (its triggers) even with admission disabled.
func TestMutatingPolicyMutateExistingRule(t *testing.T) {
	policies, _ := readCELPolicies(t, "mpol/existing.yaml")
	byName := map[string]kyvernov1.PolicyInterface{}
	for _, p := range policies {
		byName[p.GetName()] = p
	}
	spec := byName["roll-label"].GetSpec()
	if len(spec.Rules) != 1 {
		t.Fatalf("rules: %+v", spec.Rules)
	}
	r := &spec.Rules[0]
	if r.Name != "roll-label" || !r.HasMutateExisting() || r.HasMutateStandard() || !spec.RuleMutateExistingOnPolicyUpdate(r) || r.NamesOperation(kyvernov1.Delete) || !r.GetSkipBackgroundRequests() {
		t.Errorf("synthetic rule: %+v", r)
	}
	if !spec.AdmissionProcessingEnabled() {
		t.Error("a mutate-existing policy with admission disabled must still be served at admission, for its triggers")
	}
	mp := byName["roll-label"].(*policiesv1.MutatingPolicy).DeepCopy()
	skip := false
	mp.Spec.EvaluationConfiguration.SkipBackgroundRequests = &skip
	mp.Spec.MatchConstraints.ResourceRules[0].Operations = append(mp.Spec.MatchConstraints.ResourceRules[0].Operations, "DELETE")
	r = &mp.GetSpec().Rules[0]
	if r.GetSkipBackgroundRequests() || !r.NamesOperation(kyvernov1.Delete) {
		t.Errorf("skipBackgroundRequests false and DELETE: %+v", r)
	}
	mp.Spec.EvaluationConfiguration.MutateExisting = nil
	if rules := mp.GetSpec().Rules; len(rules) != 0 {
		t.Errorf("without mutateExisting: rules %+v", rules)
	}
	if webhookrules.MutatingPolicy(byName["roll-label"]) != nil {
		t.Error("admission disabled: the mutating webhook must not register the policy")
	}
	if got := webhookrules.MutateExistingTriggers(byName["roll-label"]); len(got) != 1 || got[0].Resources[0] != "configmaps" {
		t.Errorf("trigger rules: %+v", got)
	}
	// Admission patches nothing for a policy with admission disabled.
	set, err := Compile([]kyvernov1.PolicyInterface{byName["roll-label"]})
	if err != nil {
		t.Fatal(err)
	}
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "default", "labels": map[string]any{"trigger": "yes"}}}
	if resp := set.Mutate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: cm}); len(resp.Policies) != 0 || len(resp.Patch) != 0 {
		t.Errorf("admission with admission disabled: %+v", resp)
	}
}
