package engine

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/generate"
	"github.com/charter-dev/charter/engine/gpol"
	"github.com/charter-dev/charter/engine/review"
	"github.com/charter-dev/charter/engine/webhookrules"
)

func gpolObject(apiVersion, kind, namespace, name string, extra map[string]any) map[string]any {
	meta := map[string]any{"name": name, "uid": "uid-" + name}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	obj := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
	for k, v := range extra {
		obj[k] = v
	}
	return obj
}

// TestGeneratingPolicy evaluates generating policies for triggers: what
// they generate, with Kyverno's labels for the trigger, and where they
// refuse to.
func TestGeneratingPolicy(t *testing.T) {
	policies, _ := readCELPolicies(t, "gpol/policies.yaml")
	set, err := Compile(policies)
	if err != nil {
		t.Fatal(err)
	}
	ns := gpolObject("v1", "Namespace", "", "web", nil)
	for _, tc := range []struct {
		name string
		req  *review.Request
		opts []EvalOption
		// want is "policy/rule status: message" per response.
		want []string
		// objects are the generated objects' apiVersion/Kind/namespace/name.
		objects []string
	}{
		{name: "namespace created", req: &review.Request{Operation: kyvernov1.Create, Object: ns},
			want:    []string{"netpol/netpol pass: policy evaluated successfully"},
			objects: []string{"networking.k8s.io/v1/NetworkPolicy/web/default-deny"}},
		{name: "matchCondition false: no response", req: &review.Request{Operation: kyvernov1.Create, Object: gpolObject("v1", "Namespace", "", "kube-x", nil)}},
		{name: "background checks: pass without generating", req: &review.Request{Operation: kyvernov1.Create, Object: ns}, opts: []EvalOption{WithBackgroundChecks()},
			want: []string{"netpol/netpol pass: policy evaluated successfully"}},
		{name: "namespace deleted: trigger no longer matches", req: &review.Request{Operation: kyvernov1.Delete, OldObject: ns},
			want: []string{"netpol/netpol fail: trigger no longer matches"}},
		{name: "namespaced policy in its namespace", req: &review.Request{Operation: kyvernov1.Create, Object: gpolObject("apps/v1", "Deployment", "team-a", "app", nil)},
			want:    []string{"team-a/cm/cm pass: policy evaluated successfully"},
			objects: []string{"v1/ConfigMap/team-a/app-cm"}},
		{name: "namespaced policy ignores other namespaces", req: &review.Request{Operation: kyvernov1.Create, Object: gpolObject("apps/v1", "Deployment", "team-b", "app", nil)}},
		{name: "namespaced policy cannot generate elsewhere", req: &review.Request{Operation: kyvernov1.Create, Object: gpolObject("v1", "Secret", "team-a", "s", nil)},
			want: []string{`team-a/escape/escape error: failed to evaluate policy: failed to generate resources: cross-namespace generation denied: a namespaced policy generates into its own namespace "team-a" only, not "kube-system"`}},
		{name: "synchronized kind not written literally", req: &review.Request{Operation: kyvernov1.Create, Object: gpolObject("v1", "ConfigMap", "default", "c", map[string]any{"data": map[string]any{"kind": "Secret"}})},
			want: []string{"dynamic-kind/dynamic-kind error: failed to evaluate policy: v1 Secret: with synchronize, charter must find what a policy generated again; write the apiVersion and kind of every generated object literally in the policy (found: )"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := set.Generate(context.Background(), tc.req, tc.opts...)
			got, objects := generateOutcomes(resp, func(pr review.PolicyResponse, rr review.RuleResponse) string { return pr.Key + "/" + rr.Name })
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("responses\n got %q\nwant %q", got, tc.want)
			}
			if !reflect.DeepEqual(objects, tc.objects) {
				t.Errorf("objects %q, want %q", objects, tc.objects)
			}
		})
	}
}

// TestGeneratingPolicyDownstream: a generated object carries the labels
// that tie it to policy, rule (the policy's name) and trigger, and none of
// the server-set fields or ownerReferences of the literal.
func TestGeneratingPolicyDownstream(t *testing.T) {
	policies, _ := readCELPolicies(t, "gpol/policies.yaml")
	set, err := Compile(policies)
	if err != nil {
		t.Fatal(err)
	}
	resp := set.Generate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: gpolObject("v1", "Namespace", "", "web", nil)})
	objs := resp.Objects()
	if len(objs) != 1 {
		t.Fatalf("objects %v", objs)
	}
	d := objs[0]
	if !d.Synchronize || d.Rule != "netpol" || d.Policy != (generate.PolicyRef{Name: "netpol"}) || d.Trigger.UID != "uid-web" {
		t.Errorf("desired object %+v", d)
	}
	meta := d.Object["metadata"].(map[string]any)
	if _, ok := meta["uid"]; ok {
		t.Error("uid kept")
	}
	if _, ok := meta["ownerReferences"]; ok {
		t.Error("ownerReferences kept across namespaces")
	}
	labels := meta["labels"].(map[string]any)
	for k, v := range map[string]string{generate.LabelPolicyName: "netpol", generate.LabelRuleName: "netpol", generate.LabelTriggerKind: "Namespace", generate.LabelTriggerUID: "uid-web", generate.LabelManagedBy: generate.ManagedBy} {
		if labels[k] != v {
			t.Errorf("label %s = %v, want %s", k, labels[k], v)
		}
	}
	if got := gpol.GeneratedKinds(policies[0]); !reflect.DeepEqual(got, []string{"networking.k8s.io/v1/NetworkPolicy"}) {
		t.Errorf("GeneratedKinds = %v", got)
	}
	if rules := webhookrules.GeneratingPolicy(policies[0]); len(rules) != 1 || len(rules[0].Operations) != 3 {
		t.Errorf("webhookrules.GeneratingPolicy = %+v", rules)
	}
	// The synthetic rule the controllers read.
	spec := policies[0].GetSpec()
	if len(spec.Rules) != 1 || spec.Rules[0].Name != "netpol" || !spec.Rules[0].Generation.Synchronize || spec.BackgroundProcessingEnabled() {
		t.Errorf("KyvernoSpec = %+v", spec)
	}
}

func TestGeneratingPolicyFaults(t *testing.T) {
	policies, _ := readCELPolicies(t, "gpol/faults.yaml")
	_, err := Compile(policies)
	var faults fault.List
	if !errors.As(err, &faults) {
		t.Fatalf("err = %v", err)
	}
	text := faults.Error()
	for _, want := range []string{
		`GeneratingPolicy "not-bool": spec.generate[0].expression`,
		`GeneratingPolicy "no-match": spec.matchConstraints: a matchConstraints with at least one resource rule is required`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("faults lack %q:\n%s", want, text)
		}
	}
}

// TestGeneratingPolicyOnlyGenerates: validation and mutation see nothing
// of a GeneratingPolicy (its admission webhook always allows).
func TestGeneratingPolicyOnlyGenerates(t *testing.T) {
	policies, _ := readCELPolicies(t, "gpol/policies.yaml")
	set, err := Compile(policies)
	if err != nil {
		t.Fatal(err)
	}
	req := &review.Request{Operation: kyvernov1.Create, Object: gpolObject("v1", "Namespace", "", "web", nil)}
	for _, pr := range set.Validate(context.Background(), req).Policies {
		if len(pr.Rules) > 0 {
			t.Errorf("Validate: %s answered %+v", pr.Key, pr.Rules)
		}
	}
	for _, pr := range set.Mutate(context.Background(), req).Policies {
		if len(pr.Rules) > 0 {
			t.Errorf("Mutate: %s answered %+v", pr.Key, pr.Rules)
		}
	}
}

// TestGeneratingPolicyTriggerUpdate: an UPDATE after which the trigger no
// longer passes the matchConditions fails with "trigger no longer
// matches" (a synchronized policy's downstream objects for it must go),
// in the UpdateRequest generator's background checks too; an UPDATE of a
// trigger that a policy selects on CREATE only gives no response from
// it, however the trigger changed.
func TestGeneratingPolicyTriggerUpdate(t *testing.T) {
	policies, _ := readCELPolicies(t, "gpol/triggerupdate.yaml")
	set, err := Compile(policies)
	if err != nil {
		t.Fatal(err)
	}
	ns := func(labels map[string]any) map[string]any {
		o := gpolObject("v1", "Namespace", "", "web", nil)
		if labels != nil {
			o["metadata"].(map[string]any)["labels"] = labels
		}
		return o
	}
	on, off := ns(map[string]any{"netpol": "on"}), ns(nil)
	onMint := ns(map[string]any{"netpol": "on", "flavour": "mint"})
	for _, tc := range []struct {
		name     string
		old, obj map[string]any
		opts     []EvalOption
		// want is "policy status: message" per response.
		want []string
		// objects are the generated objects' apiVersion/Kind/namespace/name.
		objects []string
	}{
		{name: "condition no longer holds", old: on, obj: off, want: []string{"labelled fail: trigger no longer matches"}},
		{name: "condition no longer holds, background checks", old: on, obj: off, opts: []EvalOption{WithBackgroundChecks()},
			want: []string{"labelled fail: trigger no longer matches"}},
		{name: "condition still holds, new target", old: on, obj: onMint,
			want: []string{"labelled pass: policy evaluated successfully"}, objects: []string{"v1/ConfigMap/web/cfg-mint"}},
		{name: "condition holds now", old: off, obj: on,
			want: []string{"labelled pass: policy evaluated successfully"}, objects: []string{"v1/ConfigMap/web/cfg-plain"}},
		{name: "condition never held", old: off, obj: off},
		{name: "deleted: both policies' triggers are gone", old: on,
			want: []string{"labelled fail: trigger no longer matches", "on-create fail: trigger no longer matches"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := kyvernov1.Update
			if tc.obj == nil {
				op = kyvernov1.Delete
			}
			resp := set.Generate(context.Background(), &review.Request{Operation: op, Object: tc.obj, OldObject: tc.old}, tc.opts...)
			got, objects := generateOutcomes(resp, func(pr review.PolicyResponse, _ review.RuleResponse) string { return pr.Key })
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("responses\n got %q\nwant %q", got, tc.want)
			}
			if !reflect.DeepEqual(objects, tc.objects) {
				t.Errorf("objects %q, want %q", objects, tc.objects)
			}
		})
	}
}

// generateOutcomes lists a Generate response as "<name> <status>:
// <message>" per rule response, name given by name, and the generated
// objects' references in order.
func generateOutcomes(resp *GenerateResponse, name func(review.PolicyResponse, review.RuleResponse) string) (got, objects []string) {
	for _, pr := range resp.Policies {
		for _, rr := range pr.Rules {
			got = append(got, name(pr, rr)+" "+string(rr.Status)+": "+rr.Message)
			for _, g := range rr.Generated {
				objects = append(objects, g.Ref().String())
			}
		}
	}
	return got, objects
}

// TestGeneratedKindsOfClones: the kind a clone generates is the kind its
// resource.get or resource.list call reads, when the call names a
// built-in resource with constants (so a synchronized clone can find its
// downstream objects again); a computed or unknown resource names none.
// A copy of the trigger written field by field (apiVersion: object.apiVersion,
// kind: object.kind) generates the kinds matchConstraints names.
func TestGeneratedKindsOfClones(t *testing.T) {
	secrets := []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets", "pods/status"}}}}}
	deployments := []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}}}
	for _, tc := range []struct {
		expr  string
		rules []admissionregistrationv1.NamedRuleWithOperations
		want  []string
	}{
		{`generator.Apply("ns", [resource.get("v1", "secrets", "default", "s")])`, nil, []string{"v1/Secret"}},
		{`generator.Apply("ns", resource.List("apps/v1", "deployments", "default").items)`, nil, []string{"apps/v1/Deployment"}},
		{`generator.Apply("ns", [resource.get("example.com/v1", "widgets", "default", "w")])`, nil, nil},
		{`generator.Apply("ns", [resource.get("v1", object.metadata.name, "default", "s")])`, nil, nil},
		{`generator.Apply("ns", [{"apiVersion": object.apiVersion, "kind": object.kind, "metadata": dyn({"name": "copy"})}])`, secrets, []string{"v1/Secret"}},
		{`generator.Apply("ns", [{"apiVersion": dyn(object.apiVersion), "kind": dyn(object.kind), "metadata": dyn({"name": "copy"})}])`, deployments, []string{"apps/v1/Deployment"}},
		{`generator.Apply("ns", [{"apiVersion": "v1", "kind": object.kind, "metadata": dyn({"name": "copy"})}])`, secrets, nil},
	} {
		p := &policiesv1.GeneratingPolicy{Spec: policiesv1.GeneratingPolicySpec{Generation: []policiesv1.Generation{{Expression: tc.expr}}}}
		if tc.rules != nil {
			p.Spec.MatchConstraints = &admissionregistrationv1.MatchResources{ResourceRules: tc.rules}
		}
		if got := gpol.GeneratedKinds(p); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: GeneratedKinds = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// TestGeneratingPolicyClones: an object handed to generator.Apply that came
// from the cluster (uid and resourceVersion) is a clone: its source is
// recorded and its copy labelled with the source's uid, so a synchronized
// policy's copy follows the source and goes with it. An object whose
// apiVersion is no group/version is an error result, as Kyverno reports
// it, not a write left to fail.
func TestGeneratingPolicyClones(t *testing.T) {
	policies, _ := readCELPolicies(t, "gpol/clone.yaml")
	set, err := Compile(policies)
	if err != nil {
		t.Fatal(err)
	}
	cm := gpolObject("v1", "ConfigMap", "default", "settings", map[string]any{"data": map[string]any{"k": "v"}})
	cm["metadata"].(map[string]any)["resourceVersion"] = "42"
	objs := set.Generate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: cm}).Objects()
	if len(objs) != 1 {
		t.Fatalf("objects %v", objs)
	}
	d := objs[0]
	want := generate.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "settings", UID: "uid-settings"}
	if d.From != generate.FromClone || d.Source == nil || *d.Source != want {
		t.Errorf("from %s, source %+v, want a clone of %+v", d.From, d.Source, want)
	}
	meta := d.Object["metadata"].(map[string]any)
	if meta["namespace"] != "copies" || meta["uid"] != nil || meta["resourceVersion"] != nil {
		t.Errorf("copy's metadata %v", meta)
	}
	if got := meta["labels"].(map[string]any)[generate.LabelSourceUID]; got != "uid-settings" {
		t.Errorf("source-uid label %v", got)
	}

	resp := set.Generate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: gpolObject("v1", "Secret", "default", "s", nil)})
	got, _ := generateOutcomes(resp, func(pr review.PolicyResponse, rr review.RuleResponse) string { return pr.Key })
	wantOutcome := []string{"bad-apiversion error: failed to evaluate policy: generated object 0 (NetworkPolicy deny): unexpected GroupVersion string: networking.k8s.io/apps/v1"}
	if !reflect.DeepEqual(got, wantOutcome) {
		t.Errorf("responses\n got %q\nwant %q", got, wantOutcome)
	}
}

// TestGeneratingPolicyAuditAnnotations: a GeneratingPolicy's
// auditAnnotations are evaluated after its generate entries, and their
// non-empty values are the result's properties (Kyverno's
// reports/audit-annotations); charter's schema had no such field, and the
// policy was refused. An annotation without a key is refused.
func TestGeneratingPolicyAuditAnnotations(t *testing.T) {
	policies, _ := readCELPolicies(t, "gpol/audit.yaml")
	set, err := Compile(policies)
	if err != nil {
		t.Fatal(err)
	}
	ns := gpolObject("v1", "Namespace", "", "web", nil)
	ns["metadata"].(map[string]any)["labels"] = map[string]any{"env": "staging"}
	resp := set.Generate(context.Background(), &review.Request{Operation: kyvernov1.Create, Object: ns})
	if len(resp.Policies) != 1 || len(resp.Policies[0].Rules) != 1 {
		t.Fatalf("responses %+v", resp.Policies)
	}
	rr := resp.Policies[0].Rules[0]
	want := map[string]string{"namespace": "web", "env": "staging"}
	if rr.Status != review.StatusPass || !reflect.DeepEqual(rr.Properties, want) || len(rr.Generated) != 1 {
		t.Errorf("%s %q, properties %v (want %v), %d objects", rr.Status, rr.Message, rr.Properties, want, len(rr.Generated))
	}

	policies[0].(*policiesv1.GeneratingPolicy).Spec.AuditAnnotations[0].Key = ""
	if _, err := Compile(policies); err == nil || !strings.Contains(err.Error(), "spec.auditAnnotations[0].key: an audit annotation needs a key") {
		t.Errorf("compiling an annotation without a key: %v", err)
	}
}
