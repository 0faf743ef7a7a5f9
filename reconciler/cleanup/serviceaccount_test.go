package cleanup

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
)

// TestServiceAccountActsForEveryPolicy: with Options.ServiceAccount (charter
// dev --cleanup-service-account, as Kyverno's cleanup controller acts with
// its own ServiceAccount), a DeletingPolicy and a NamespacedDeletingPolicy
// list and delete as that ServiceAccount only. Without rights it deletes
// nothing (the NamespacedDeletingPolicy neither, though its namespace's
// charter-policy may delete ConfigMaps there) and RBACPermissionsGranted
// says why, naming it; once a ClusterRoleBinding grants it ConfigMaps,
// both policies delete. charter's own (admin) identity would have deleted
// everything at once.
func TestServiceAccountActsForEveryPolicy(t *testing.T) {
	e := startEnv(t)
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kyverno"}})
	e.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kyverno", Name: "kyverno-cleanup-controller"}})
	e.serviceAccount = "kyverno/kyverno-cleanup-controller"
	e.create(configMap("team-a", "tenant-junk", map[string]string{"purge": "yes"}))
	e.create(configMap("team-b", "junk", map[string]string{"purge": "yes"}))
	e.startController()
	e.create(decodePolicy(t, &policiesv1.DeletingPolicy{}, `
metadata: {name: purge-team-b}
spec:
  schedule: "*/2 * * * * *"
  matchConstraints:
    objectSelector: {matchLabels: {purge: "yes"}}
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-b}}
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: ["*"]
      resources: [configmaps]
`))
	e.create(decodePolicy(t, &policiesv1.NamespacedDeletingPolicy{}, `
metadata: {name: purge, namespace: team-a}
spec:
  schedule: "*/2 * * * * *"
  matchConstraints:
    objectSelector: {matchLabels: {purge: "yes"}}
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: ["*"]
      resources: [configmaps]
`))
	refused := func(p client.Object, status func() policiesv1.ConditionStatus) func() error {
		return func() error {
			if err := e.cl.Get(e.ctx, client.ObjectKeyFromObject(p), p); err != nil {
				return err
			}
			rbac := findCondition(status().Conditions, policiesv1.ConditionRBACPermissionsGranted)
			if rbac == nil || rbac.Status != metav1.ConditionFalse || rbac.Reason != ReasonForbidden ||
				!strings.Contains(rbac.Message, "kyverno/kyverno-cleanup-controller") || !strings.Contains(rbac.Message, "forbidden") {
				return fmt.Errorf("RBACPermissionsGranted %+v", rbac)
			}
			return nil
		}
	}
	dpol := &policiesv1.DeletingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "purge-team-b"}}
	ndpol := &policiesv1.NamespacedDeletingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "purge"}}
	e.eventually("the DeletingPolicy's run is refused as the ServiceAccount", 20*time.Second,
		refused(dpol, func() policiesv1.ConditionStatus { return dpol.Status.ConditionStatus }))
	e.eventually("the NamespacedDeletingPolicy's run is refused as the ServiceAccount", 20*time.Second,
		refused(ndpol, func() policiesv1.ConditionStatus { return ndpol.Status.ConditionStatus }))
	for _, ns := range []string{"team-a", "team-b"} {
		name := map[string]string{"team-a": "tenant-junk", "team-b": "junk"}[ns]
		if !e.exists(ns, name) {
			t.Errorf("ConfigMap %s/%s deleted though the ServiceAccount may not delete it", ns, name)
		}
	}

	e.create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cleanup-configmaps"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "delete"}}}})
	e.create(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cleanup-configmaps"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cleanup-configmaps"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kyverno", Name: "kyverno-cleanup-controller"}}})
	e.eventually("the DeletingPolicy deletes once the ServiceAccount may", 20*time.Second, e.gone("team-b", "junk"))
	e.eventually("the NamespacedDeletingPolicy deletes once the ServiceAccount may", 20*time.Second, e.gone("team-a", "tenant-junk"))
}

// TestServiceAccountMustNameOne: a malformed Options.ServiceAccount fails
// Setup, naming it, rather than acting as charter.
func TestServiceAccountMustNameOne(t *testing.T) {
	for _, sa := range []string{"kyverno-cleanup-controller", "/x", "kyverno/", "a/b/c"} {
		if _, err := serviceAccountClient(nil, sa); err == nil || !strings.Contains(err.Error(), sa) {
			t.Errorf("ServiceAccount %q: error %v, want one naming it", sa, err)
		}
	}
}
