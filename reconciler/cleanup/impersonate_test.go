package cleanup

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// TestNamespacedPolicyDeletesAsItsServiceAccount: a namespaced
// CleanupPolicy or NamespacedDeletingPolicy lists and deletes as the
// ServiceAccount charter-policy of its namespace, though the controller
// itself runs as the cluster's admin here: what the tenant's ServiceAccount
// may delete (ConfigMaps, under a namespace owner's rights) goes, a
// ResourceQuota the platform placed (an owner may only read it) stays and
// the run fails naming the
// ServiceAccount and the verb; in a namespace without that ServiceAccount
// nothing is deleted and the run says the ServiceAccount does not exist.
// Without impersonation every object here would be deleted.
func TestNamespacedPolicyDeletesAsItsServiceAccount(t *testing.T) {
	e := startEnv(t)
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-c"}})
	for _, ns := range []string{"team-a", "team-c"} {
		e.create(configMap(ns, "junk", map[string]string{"purge": "yes"}))
		e.create(&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "platform", Labels: map[string]string{"purge": "yes"}},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}})
	}
	e.startController()
	for _, ns := range []string{"team-a", "team-c"} {
		e.create(decodePolicy(t, &kyvernov2.CleanupPolicy{}, `
metadata: {name: purge, namespace: `+ns+`}
spec:
  schedule: "*/2 * * * * *"
  match:
    any:
    - resources:
        kinds: [ConfigMap, ResourceQuota]
        selector: {matchLabels: {purge: "yes"}}
`))
	}
	e.eventually("team-a's ConfigMap deleted as team-a/charter-policy", 20*time.Second, e.gone("team-a", "junk"))
	readyMessage := func(ns string, want ...string) func() error {
		return func() error {
			var p kyvernov2.CleanupPolicy
			if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "purge"}, &p); err != nil {
				return err
			}
			c := findCondition(p.Status.Conditions, ConditionReady)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonRunFailed {
				return fmt.Errorf("Ready %+v", c)
			}
			for _, w := range want {
				if !strings.Contains(c.Message, w) {
					return fmt.Errorf("Ready message %q lacks %q", c.Message, w)
				}
			}
			return nil
		}
	}
	e.eventually("team-a's run fails naming the ServiceAccount and the refused delete", 20*time.Second,
		readyMessage("team-a", "deleting ResourceQuota/team-a/platform", "as ServiceAccount team-a/charter-policy", "forbidden"))
	e.eventually("team-c's run fails: no ServiceAccount", 20*time.Second,
		readyMessage("team-c", "ServiceAccount team-c/charter-policy does not exist"))
	for _, ns := range []string{"team-a", "team-c"} {
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: ns, Name: "platform"}, &corev1.ResourceQuota{}); err != nil {
			t.Errorf("ResourceQuota %s/platform: %v", ns, err)
		}
	}
	if !e.exists("team-c", "junk") {
		t.Error("team-c/junk deleted though team-c has no ServiceAccount charter-policy")
	}

	// A NamespacedDeletingPolicy goes the same way.
	e.create(decodePolicy(t, &policiesv1.NamespacedDeletingPolicy{}, `
metadata: {name: purge-quotas, namespace: team-a}
spec:
  schedule: "*/2 * * * * *"
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: ["*"]
      resources: [resourcequotas]
`))
	e.eventually("the NamespacedDeletingPolicy's run fails: RBACPermissionsGranted and Executed False, naming the ServiceAccount", 20*time.Second, func() error {
		var p policiesv1.NamespacedDeletingPolicy
		if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "team-a", Name: "purge-quotas"}, &p); err != nil {
			return err
		}
		cs := p.Status.ConditionStatus
		if cs.Ready == nil || *cs.Ready || !strings.Contains(cs.Message, "as ServiceAccount team-a/charter-policy") {
			return fmt.Errorf("conditionStatus %+v", cs)
		}
		rbac := findCondition(cs.Conditions, policiesv1.ConditionRBACPermissionsGranted)
		if rbac == nil || rbac.Status != metav1.ConditionFalse || rbac.Reason != ReasonForbidden || rbac.ObservedGeneration != p.Generation ||
			!strings.Contains(rbac.Message, "deleting ResourceQuota/team-a/platform") || !strings.Contains(rbac.Message, "forbidden") {
			return fmt.Errorf("RBACPermissionsGranted %+v", rbac)
		}
		run := findCondition(cs.Conditions, policiesv1.ConditionExecuted)
		if run == nil || run.Status != metav1.ConditionFalse || run.Reason != ReasonRunFailed || run.ObservedGeneration != p.Generation {
			return fmt.Errorf("Executed %+v", run)
		}
		return nil
	})
	if err := e.cl.Get(e.ctx, client.ObjectKey{Namespace: "team-a", Name: "platform"}, &corev1.ResourceQuota{}); err != nil {
		t.Errorf("ResourceQuota team-a/platform: %v", err)
	}
}
