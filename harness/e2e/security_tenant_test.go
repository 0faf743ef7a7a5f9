package e2e

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The tenant of the security specs: a user who holds the built-in admin
// ClusterRole in one namespace, plus the right to write the policy kinds
// its attack needs there (as Kyverno's aggregated roles give), and
// nothing else anywhere. Every security spec builds its attacker here, so
// that all of them attack with the same rights.

// namespaceAdmin makes user the admin of namespace (the built-in admin
// ClusterRole, filled in as a controller manager would), with the extra
// rules of a Role there (the policy kinds it may write), and returns a
// client acting as that user.
func namespaceAdmin(ctx context.Context, user, namespace string, extra ...rbacv1.PolicyRule) client.Client {
	GinkgoHelper()
	cl := suite.client
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user + "-policies"}, Rules: extra}
	objs := []client.Object{role}
	for _, ref := range []rbacv1.RoleRef{
		{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
	} {
		objs = append(objs, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: user + "-" + strings.ToLower(ref.Kind)},
			RoleRef:    ref,
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		})
	}
	for _, obj := range objs {
		Expect(client.IgnoreAlreadyExists(cl.Create(ctx, obj))).To(Succeed(), "%T %s/%s", obj, namespace, obj.GetName())
	}
	// admin is an aggregated ClusterRole: without a controller manager to
	// fill it in, it holds no rules.
	aggregateClusterRoles(ctx)
	return clientAs(rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}})
}

// policyWriter is the rule of a namespaceAdmin's Role that lets it write
// the named resources of a policy API group.
func policyWriter(group string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: []string{"*"}}
}

// clientAs is a client of the suite's API server acting as who.
func clientAs(who rest.ImpersonationConfig) client.Client {
	GinkgoHelper()
	cfg := rest.CopyConfig(suite.config)
	cfg.Impersonate = who
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// grantPolicyServiceAccountAdmin is what a tenant does, as docs/tenancy.md
// tells a namespace's owner to: it creates its namespace's ServiceAccount
// that charter impersonates for the namespaced policies there
// (rightsPolicySA) and gives it all the tenant may, admin.
func grantPolicyServiceAccountAdmin(ctx context.Context, tenant client.Client, namespace string) {
	GinkgoHelper()
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: rightsPolicySA}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: rightsPolicySA},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: rightsPolicySA}}},
	} {
		Expect(client.IgnoreAlreadyExists(tenant.Create(ctx, obj))).To(Succeed(), "%T %s/%s", obj, namespace, obj.GetName())
	}
}

// serviceAccountClient is a client that authenticates as the
// ServiceAccount namespace/name with a token the tenant requested itself
// (admin may create ServiceAccount tokens in its namespace): whatever
// that ServiceAccount is let do, the tenant can do.
func serviceAccountClient(ctx context.Context, tenant client.Client, namespace, name string) client.Client {
	GinkgoHelper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	Expect(tenant.SubResource("token").Create(ctx, sa, req)).To(Succeed(), "the tenant's TokenRequest for ServiceAccount %s/%s", namespace, name)
	cfg := rest.AnonymousClientConfig(suite.config)
	cfg.BearerToken = req.Status.Token
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

// grantServiceAccount creates the ServiceAccount namespace/name and a Role
// of rules, of the same name, bound to it.
func grantServiceAccount(ctx context.Context, namespace, name string, rules ...rbacv1.PolicyRule) {
	GinkgoHelper()
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: rules},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}}},
	} {
		Expect(client.IgnoreAlreadyExists(suite.client.Create(ctx, obj))).To(Succeed(), "%T %s/%s", obj, namespace, obj.GetName())
	}
}
