package admission

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// jsonPatchRemovalManifests remove the first two containers by index,
// with a ClusterPolicy's patchesJson6902 and with a MutatingPolicy's
// JSONPatch: RFC 6902 applies the operations one after the other, each
// index relative to the list the previous one left, as Kyverno's
// evanphx/json-patch and the API server's patcher do.
const jsonPatchRemovalManifests = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: remove-by-index}
spec:
  rules:
  - name: remove-first-two
    match:
      any:
      - resources:
          kinds: [Pod]
          namespaces: [jsonpatch]
          selector: {matchLabels: {patch: cpol}}
    mutate:
      patchesJson6902: |-
        - op: remove
          path: /spec/containers/0
        - op: remove
          path: /spec/containers/1
---
apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
metadata: {name: remove-by-index-cel}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: jsonpatch}}
    objectSelector: {matchLabels: {patch: mpol}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "remove", path: "/spec/containers/0"}, JSONPatch{op: "remove", path: "/spec/containers/1"}]'
`

// TestJSONPatchRemovesByIndexInOrder: on the real API server, removing
// /spec/containers/0 then /spec/containers/1 from [a, b, c, d] stores
// [b, d], for both policy kinds. charter already did so; the test pins it.
func TestJSONPatchRemovesByIndexInOrder(t *testing.T) {
	f := startAdmission(t, withNamespaces("jsonpatch"))
	ctx, cl := f.ctx, f.client
	f.installReady(t, jsonPatchRemovalManifests)
	for _, kind := range []string{"cpol", "mpol"} {
		eventually(t, kind+": Pod stored with containers [b d]", 30*time.Second, func() error {
			p := podIn("four-"+kind, "jsonpatch", map[string]string{"patch": kind})
			p.Spec.Containers = nil
			for _, n := range []string{"a", "b", "c", "d"} {
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: n, Image: "registry.example/" + n + ":1"})
			}
			if err := cl.Create(ctx, p); err != nil {
				return err
			}
			var names []string
			for _, c := range p.Spec.Containers {
				names = append(names, c.Name)
			}
			if fmt.Sprint(names) == "[b d]" {
				return nil
			}
			// Served once the policy's webhook rule is registered.
			_ = cl.Delete(ctx, p)
			return fmt.Errorf("containers %v", names)
		})
	}
}
