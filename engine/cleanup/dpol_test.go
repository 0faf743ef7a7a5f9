package cleanup

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/engine/celruntime"
	"github.com/charter-dev/charter/engine/loader"
)

func namespacedDeletingPolicy(t *testing.T, y string) *policiesv1.NamespacedDeletingPolicy {
	t.Helper()
	p := &policiesv1.NamespacedDeletingPolicy{}
	if err := yaml.UnmarshalStrict([]byte(y), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDeletingPolicySelects: a NamespacedDeletingPolicy selects objects
// of its resources in its own namespace whose conditions hold.
func TestDeletingPolicySelects(t *testing.T) {
	p, err := Compile(namespacedDeletingPolicy(t, `
metadata: {name: old, namespace: team-a}
spec:
  schedule: "@hourly"
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  variables:
  - {name: keep, expression: "object.metadata.?labels.?keep.orValue('') == 'true'"}
  conditions:
  - {name: not-kept, expression: "!variables.keep"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Resources(); len(got) != 1 || got[0] != (schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}) {
		t.Errorf("Resources = %v", got)
	}
	run, err := p.Prepare(context.Background(), loader.Loaders{})
	if err != nil {
		t.Fatal(err)
	}
	cm := func(ns string, labels map[string]any) Object {
		return Object{Kind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": ns, "labels": labels}}}
	}
	// An exception in team-a for this policy keeps ConfigMaps labelled
	// exempt=true.
	ex := &policiesv1.PolicyException{}
	if err := yaml.UnmarshalStrict([]byte(`
metadata: {name: keep-exempt, namespace: team-a}
spec:
  policyRefs: [{name: old, kind: NamespacedDeletingPolicy}]
  matchConditions:
  - {name: exempt, expression: "object.metadata.?labels.?exempt.orValue('') == 'true'"}
`), ex); err != nil {
		t.Fatal(err)
	}
	if err := run.WithExceptions([]*policiesv1.PolicyException{ex}, celruntime.ExceptionOwnNamespace); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		obj  Object
		want bool
	}{
		{"exempted by a PolicyException", cm("team-a", map[string]any{"exempt": "true"}), false},
		{"own namespace", cm("team-a", nil), true},
		{"condition false", cm("team-a", map[string]any{"keep": "true"}), false},
		{"other namespace", cm("team-b", nil), false},
		{"other resource", Object{Kind: schema.GroupVersionKind{Version: "v1", Kind: "Secret"},
			Object: map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s", "namespace": "team-a"}}}, false},
	} {
		got, err := run.Selects(tc.obj)
		if err != nil || got != tc.want {
			t.Errorf("%s: Selects = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestDeletingPolicyFaults(t *testing.T) {
	_, err := Compile(namespacedDeletingPolicy(t, `
metadata: {name: bad, namespace: team-a}
spec:
  schedule: "61 * * * *"
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: ["*", pods/log]}
  conditions:
  - {name: not-bool, expression: "'x'"}
`))
	if err == nil {
		t.Fatal("compiled")
	}
	for _, want := range []string{
		`NamespacedDeletingPolicy "team-a/bad": spec.schedule: invalid schedule "61 * * * *"`,
		`spec.matchConstraints.resourceRules[0].resources[0]: "*": a DeletingPolicy must name the resources it deletes`,
		`spec.matchConstraints.resourceRules[0].resources[1]: "pods/log"`,
		`spec.conditions[0].expression`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// TestDeletingPolicyExceptionsActInTheirNamespace: for a cluster-wide
// DeletingPolicy, a tenant's PolicyException keeps the objects of its own
// namespace only (the run asks dpol with the object's namespace as the
// exceptions' scope), and the policy's libraries read every namespace.
func TestDeletingPolicyExceptionsActInTheirNamespace(t *testing.T) {
	src := &policiesv1.DeletingPolicy{}
	if err := yaml.UnmarshalStrict([]byte(`
metadata: {name: sweep}
spec:
  schedule: "@hourly"
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: [configmaps]}
  conditions:
  - {name: switch-on, expression: "resource.Get('v1', 'configmaps', 'ops', 'switch').data.sweep == 'on'"}
`), src); err != nil {
		t.Fatal(err)
	}
	p, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "switch", "namespace": "ops"}, "data": map[string]any{"sweep": "on"}}
	run, err := p.Prepare(context.Background(), loader.Loaders{Resources: oneResource{ops}})
	if err != nil {
		t.Fatal(err)
	}
	ex := &policiesv1.PolicyException{}
	if err := yaml.UnmarshalStrict([]byte(`
metadata: {name: keep-everything, namespace: team-a}
spec:
  policyRefs: [{name: sweep, kind: DeletingPolicy}]
  matchConditions:
  - {name: always, expression: "true"}
`), ex); err != nil {
		t.Fatal(err)
	}
	if err := run.WithExceptions([]*policiesv1.PolicyException{ex}, celruntime.ExceptionOwnNamespace); err != nil {
		t.Fatal(err)
	}
	for ns, want := range map[string]bool{"team-a": false, "team-b": true} {
		got, err := run.Selects(Object{Kind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": ns}}})
		if err != nil || got != want {
			t.Errorf("a ConfigMap of %s: Selects = %v, %v; want %v", ns, got, err, want)
		}
	}
}

// oneResource serves one object to resource.Get.
type oneResource struct{ obj map[string]any }

func (r oneResource) Resource(_ context.Context, apiVersion, _, namespace, name string) (map[string]any, error) {
	meta := r.obj["metadata"].(map[string]any)
	if r.obj["apiVersion"] != apiVersion || meta["namespace"] != namespace || meta["name"] != name {
		return nil, fmt.Errorf("%s %s/%s not found", apiVersion, namespace, name)
	}
	return r.obj, nil
}

func (r oneResource) Resources(context.Context, string, string, string) ([]map[string]any, error) {
	return nil, nil
}
