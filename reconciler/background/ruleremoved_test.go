package background

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
)

// TestRuleNoLongerGenerating edits a policy on a real API server so that
// one synchronized generate rule becomes a validate rule under the same
// name and another, which orphans its downstream, is removed, while a
// third keeps generating: as for a deleted policy, the first rule's
// NetworkPolicy is deleted and the orphaning rule's ConfigMap is kept;
// the third rule's ConfigMap is untouched.
func TestRuleNoLongerGenerating(t *testing.T) {
	e := startEnv(t)
	e.startController(Options{})
	rule := func(doc string) kyvernov1.Rule {
		t.Helper()
		var r kyvernov1.Rule
		if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	configMapRule := func(name string, orphan bool) kyvernov1.Rule {
		return rule(fmt.Sprintf(`
name: %[1]s
match: {any: [{resources: {kinds: [Namespace], names: [stops-generating]}}]}
generate:
  synchronize: true
  orphanDownstreamOnPolicyDelete: %[2]t
  apiVersion: v1
  kind: ConfigMap
  name: %[1]s
  namespace: "{{ request.object.metadata.name }}"
  data: {data: {rule: %[1]s}}
`, name, orphan))
	}
	e.applyPolicy("default-deny.yaml", func(p *kyvernov1.ClusterPolicy) {
		p.Spec.Rules = append(p.Spec.Rules, configMapRule("orphaned", true), configMapRule("kept", false))
	})
	// The trigger comes after the policy, through admission: the two
	// ConfigMap rules have no generateExisting, and a trigger older than
	// the policy is one they must leave alone.
	e.admit(kyvernov1.Create, e.namespace("stops-generating"), nil)
	configMap := func(name string) error {
		var cm corev1.ConfigMap
		return e.cl.Get(e.ctx, client.ObjectKey{Namespace: "stops-generating", Name: name}, &cm)
	}
	e.eventually("the three rules' objects generated", func() error {
		if _, err := e.networkPolicy("stops-generating"); err != nil {
			return err
		}
		for _, name := range []string{"orphaned", "kept"} {
			if err := configMap(name); err != nil {
				return err
			}
		}
		return nil
	})

	e.applyPolicy("default-deny.yaml", func(p *kyvernov1.ClusterPolicy) {
		p.Spec.Rules = []kyvernov1.Rule{rule(`
name: default-deny
match: {any: [{resources: {kinds: [Namespace]}}]}
validate: {message: labelled, pattern: {metadata: {labels: {bg-test: "?*"}}}}
`), configMapRule("kept", false)}
	})
	e.eventually("the NetworkPolicy of the rule that no longer generates deleted", func() error {
		if _, err := e.networkPolicy("stops-generating"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("NetworkPolicy default-deny still there (err %v)", err)
		}
		return nil
	})
	for _, name := range []string{"orphaned", "kept"} {
		if err := configMap(name); err != nil {
			t.Errorf("ConfigMap %s: %v", name, err)
		}
	}
}
