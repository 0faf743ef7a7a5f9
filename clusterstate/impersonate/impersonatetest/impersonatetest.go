// Package impersonatetest sets up, for tests on a real API server, the
// ServiceAccount that charter impersonates for a namespace's namespaced
// policies.
package impersonatetest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/clusterstate/impersonate"
)

// NamespaceOwnerRules are what the admin ClusterRole allows a namespace's
// owner for the kinds charter's tests write (the local control plane runs
// no controller manager, so the aggregated admin role has no rules
// there): ConfigMaps, NetworkPolicies, Roles and RoleBindings; ResourceQuotas
// read only.
var NamespaceOwnerRules = func() []rbacv1.PolicyRule {
	rw := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: rw},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: rw},
		{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}, Verbs: rw},
		{APIGroups: []string{""}, Resources: []string{"resourcequotas"}, Verbs: []string{"get", "list", "watch"}},
	}
}()

// Grant creates, in namespace, the ServiceAccount charter impersonates for
// the namespaced policies there (impersonate.DefaultServiceAccount) and a
// Role of NamespaceOwnerRules bound to it, as docs/tenancy.md tells a
// namespace's owner to.
func Grant(ctx context.Context, c client.Client, namespace string) error {
	name := impersonate.DefaultServiceAccount
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: NamespaceOwnerRules},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s/%s: %w", obj, namespace, obj.GetName(), err)
		}
	}
	return nil
}
