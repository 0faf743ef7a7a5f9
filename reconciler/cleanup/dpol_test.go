package cleanup

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	e.eventually("status in Kyverno's shape: conditionStatus ready at the generation, lastExecutionTime", 10*time.Second, func() error {
		var p policiesv1.DeletingPolicy
		if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "purge-configmaps"}, &p); err != nil {
			return err
		}
		return ranThrough(p.Status, p.Generation)
	})
	e.eventually("the NamespacedDeletingPolicy's status too", 10*time.Second, func() error {
		var p policiesv1.NamespacedDeletingPolicy
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "team-a", Name: "tenant-purge"}, &p); err != nil {
			return err
		}
		return ranThrough(p.Status, p.Generation)
	})
	if note, err := e.eventFor(ReasonPolicyApplied, "old-1"); err != nil {
		t.Error(err)
	} else {
		t.Logf("event: %s", note)
	}

	// An edit: once decided, no condition is left about the generation
	// before (Argo CD would wait on it).
	var p policiesv1.DeletingPolicy
	if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "purge-configmaps"}, &p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Schedule = "0 0 1 1 *"
	if err := e.cl.Update(e.ctx, &p); err != nil {
		t.Fatal(err)
	}
	e.eventually("the edited DeletingPolicy decided at its new generation", 10*time.Second, func() error {
		var p policiesv1.DeletingPolicy
		if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "purge-configmaps"}, &p); err != nil {
			return err
		}
		cs := p.Status.ConditionStatus
		if !cs.ReadyAt(p.Generation) || len(cs.Conditions) != 1 || cs.Conditions[0].Type != policiesv1.ConditionPolicyCached {
			return fmt.Errorf("generation %d: conditionStatus %+v", p.Generation, cs)
		}
		return nil
	})
}

// ranThrough checks a DeletingPolicy status after a run that went
// through: ready, no message, PolicyCached, RBACPermissionsGranted and
// Executed True about the generation, and lastExecutionTime.
func ranThrough(st policiesv1.DeletingPolicyStatus, generation int64) error {
	cs := st.ConditionStatus
	if st.LastExecutionTime == nil || !cs.ReadyAt(generation) || cs.Message != "" {
		return fmt.Errorf("status %+v", st)
	}
	for _, typ := range []string{policiesv1.ConditionPolicyCached, policiesv1.ConditionRBACPermissionsGranted, policiesv1.ConditionExecuted} {
		c := apimeta.FindStatusCondition(cs.Conditions, typ)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != policiesv1.ReasonSucceeded || c.ObservedGeneration != generation {
			return fmt.Errorf("condition %s: %+v", typ, c)
		}
	}
	return nil
}

// TestDeletingPolicyInvalid: a DeletingPolicy stored without charter's
// webhook (it predates charter) that does not compile is not ready, its
// PolicyCached condition False with charter's reason naming the field.
func TestDeletingPolicyInvalid(t *testing.T) {
	e := startEnv(t)
	e.startController()
	e.create(decodePolicy(t, &policiesv1.DeletingPolicy{}, `
metadata: {name: broken}
spec:
  schedule: "every minute"
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: ["*"]
      resources: [configmaps]
`))
	e.eventually("PolicyCached False", 10*time.Second, func() error {
		var p policiesv1.DeletingPolicy
		if err := e.cl.Get(e.ctx, client.ObjectKey{Name: "broken"}, &p); err != nil {
			return err
		}
		cs := p.Status.ConditionStatus
		c := apimeta.FindStatusCondition(cs.Conditions, policiesv1.ConditionPolicyCached)
		if cs.Ready == nil || *cs.Ready || c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonInvalidPolicy ||
			c.ObservedGeneration != p.Generation || !strings.Contains(c.Message, "spec.schedule") || cs.Message != c.Message {
			return fmt.Errorf("conditionStatus %+v", cs)
		}
		return nil
	})
}
