package admission

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// mpolManifests are the policies of TestMutatingPolicyOnRealAPIServer: a
// MutatingPolicy labelling and annotating Pods in namespace shop (an
// ApplyConfiguration, then a JSONPatch reading its result), one whose
// JSONPatch fails for Pods labelled break (failurePolicy Fail), and a
// NamespacedMutatingPolicy of namespace team-a.
const mpolManifests = `
apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
metadata: {name: label-shop}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: shop}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"mutated-by": "mpol"}}}'
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/metadata/annotations", value: {"seen": object.metadata.labels["mutated-by"]}}]'
---
apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
metadata: {name: break-on-label}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  matchConditions:
  - {name: labelled-break, expression: "has(object.metadata.labels) && 'break' in object.metadata.labels"}
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "remove", path: "/spec/nodeSelector"}]'
---
apiVersion: policies.kyverno.io/v1
kind: NamespacedMutatingPolicy
metadata: {name: tenant-label, namespace: team-a}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"tenant": "team-a"}}}'
`

// TestMutatingPolicyOnRealAPIServer: MutatingPolicies installed in the
// cluster become Ready and patch what the API server stores, in order; an
// error under failurePolicy Fail denies in Kyverno's words; a
// NamespacedMutatingPolicy patches its own namespace's Pods only.
func TestMutatingPolicyOnRealAPIServer(t *testing.T) {
	f := startAdmission(t, withNamespaces("shop", "team-a", "team-b"))
	ctx, cl := f.ctx, f.client
	policies := f.installReady(t, mpolManifests)

	created := func(t *testing.T, name, ns string, labels map[string]string) *corev1.Pod {
		t.Helper()
		var p *corev1.Pod
		eventually(t, "Pod "+ns+"/"+name+" mutated", 30*time.Second, func() error {
			p = podIn(name, ns, labels)
			if err := cl.Create(ctx, p); err != nil {
				return err
			}
			if ns != "shop" || p.Labels["mutated-by"] == "mpol" {
				return nil
			}
			// Served once the policy's webhook rule is registered.
			_ = cl.Delete(ctx, p)
			return errNotYet("Pod created unmutated")
		})
		return p
	}

	t.Run("both mutations patch the stored Pod, the second reading the first", func(t *testing.T) {
		p := created(t, "web", "shop", nil)
		if p.Labels["mutated-by"] != "mpol" || p.Annotations["seen"] != "mpol" {
			t.Errorf("stored Pod labels %v, annotations %v", p.Labels, p.Annotations)
		}
	})

	t.Run("an error under failurePolicy Fail denies", func(t *testing.T) {
		err := cl.Create(ctx, podIn("broken", "shop", map[string]string{"break": "yes"}))
		want := "Resource: shop/broken, Kind: Pod, Errors: [Policy break-on-label: failed to evaluate policy: JSON Patch: "
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want a denial containing %q", err, want)
		}
	})

	t.Run("a MutatingPolicy that does not compile is refused, naming the field", func(t *testing.T) {
		broken := policies[0].DeepCopyObject().(*policiesv1.MutatingPolicy)
		broken.ResourceVersion = ""
		broken.Name = "broken"
		broken.Spec.Mutations[0].ApplyConfiguration.Expression = "object.metadata"
		err := cl.Create(ctx, broken)
		want := "spec.mutations[0].applyConfiguration.expression"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want a refusal naming %s", err, want)
		}
	})

	t.Run("a NamespacedMutatingPolicy acts in its own namespace only", func(t *testing.T) {
		eventually(t, "team-a Pod labelled", 30*time.Second, func() error {
			p := podIn("web", "team-a", nil)
			if err := cl.Create(ctx, p); err != nil {
				return err
			}
			if p.Labels["tenant"] == "team-a" {
				return nil
			}
			_ = cl.Delete(ctx, p)
			return errNotYet("team-a Pod created without the tenant label")
		})
		p := podIn("web", "team-b", nil)
		if err := cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if _, ok := p.Labels["tenant"]; ok {
			t.Errorf("team-a's policy labelled a Pod of team-b: %v", p.Labels)
		}
	})
}
