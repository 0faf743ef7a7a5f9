package cleanup

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// TestDeletingPolicy runs a DeletingPolicy and a NamespacedDeletingPolicy
// on their schedules against a real API server: what the matchConstraints
// and CEL conditions select is deleted, the rest stays, the namespaced
// policy deletes in its own namespace only, and the status records the
// run.
func TestDeletingPolicy(t *testing.T) {
	e := startEnv(t)
	e.startController()
	for _, cm := range []*corev1.ConfigMap{
		configMap("team-a", "old-1", map[string]string{"dpol": "yes"}),
		configMap("team-b", "old-2", map[string]string{"dpol": "yes"}),
		configMap("team-a", "pinned", map[string]string{"dpol": "yes", "pinned": "true"}),
		configMap("team-b", "unlabelled", nil),
		configMap("team-a", "tenant-1", map[string]string{"tenant-purge": "yes"}),
		configMap("team-b", "tenant-2", map[string]string{"tenant-purge": "yes"}),
	} {
		e.create(cm)
	}
	e.create(decodePolicy(t, &policiesv1.DeletingPolicy{}, `
metadata: {name: purge-configmaps}
spec:
  schedule: "*/2 * * * * *"
  deletionPropagationPolicy: Background
  matchConstraints:
    objectSelector: {matchLabels: {dpol: "yes"}}
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [configmaps]
  variables:
  - name: pinned
    expression: "object.metadata.?labels.?pinned.orValue('false') == 'true'"
  conditions:
  - name: not-pinned
    expression: "!variables.pinned"
`))
	e.create(decodePolicy(t, &policiesv1.NamespacedDeletingPolicy{}, `
metadata: {name: tenant-purge, namespace: team-a}
spec:
  schedule: "*/2 * * * * *"
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: ["*"]
      resources: [configmaps]
  conditions:
  - name: labelled
    expression: "object.metadata.?labels[?'tenant-purge'].orValue('') == 'yes'"
`))
	e.eventually("the selected ConfigMaps deleted", 20*time.Second, func() error {
		for _, k := range [][2]string{{"team-a", "old-1"}, {"team-b", "old-2"}, {"team-a", "tenant-1"}} {
			if err := e.gone(k[0], k[1])(); err != nil {
				return err
			}
		}
		return nil
	})
	for _, k := range [][2]string{{"team-a", "pinned"}, {"team-b", "unlabelled"}, {"team-b", "tenant-2"}} {
		if !e.exists(k[0], k[1]) {
			t.Errorf("%s/%s deleted", k[0], k[1])
		}
	}
	e.eventually("status: Ready and lastExecutionTime", 10*time.Second, func() error {
		var p policiesv1.DeletingPolicy
		if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "purge-configmaps"}, &p); err != nil {
			return err
		}
		ready := apimeta.FindStatusCondition(p.Status.Conditions, ConditionReady)
		if p.Status.LastExecutionTime == nil || ready == nil || ready.Status != "True" {
			return fmt.Errorf("status %+v", p.Status)
		}
		return nil
	})
	if note, err := e.eventFor(ReasonPolicyApplied, "old-1"); err != nil {
		t.Error(err)
	} else {
		t.Logf("event: %s", note)
	}
}
