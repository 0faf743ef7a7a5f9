package admission

import (
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestRolesOnRealAPIServer checks that match/exclude by roles and
// clusterRoles sees the requester's RoleBindings and ClusterRoleBindings,
// for users, groups and service accounts, and follows binding changes.
func TestRolesOnRealAPIServer(t *testing.T) {
	ref := func(kind, name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	}
	operators := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "olivia-operator"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "olivia"}},
		RoleRef:  ref("ClusterRole", "cluster-operator")}
	f := startAdmission(t,
		withNamespaces("shared"),
		withObjects(
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cluster-operator"},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}}},
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "editor", Namespace: "shared"},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}}},
			operators,
			// RBAC lets everyone write ConfigMaps; the policy decides.
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "configmap-writer"},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "everyone-writes-configmaps"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"}},
				RoleRef:  ref("ClusterRole", "configmap-writer")},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "editors", Namespace: "shared"},
				Subjects: []rbacv1.Subject{
					{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "editors"},
					// No namespace: the service account of the binding's namespace.
					{Kind: rbacv1.ServiceAccountKind, Name: "builder"},
				},
				RoleRef: ref("Role", "editor")},
			// The same Role name bound in another namespace is another role.
			&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "editor", Namespace: charterNamespace}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "victor-elsewhere", Namespace: charterNamespace},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "victor"}},
				RoleRef:  ref("Role", "editor")},
		),
		withOptions(func(o *Options) { o.Events.Disabled = true }),
	)
	ctx, cl := f.ctx, f.client

	// The policy goes in once the policy webhook answers.
	eventually(t, "policy created", 30*time.Second, func() error {
		return cl.Create(ctx, policyFile(t, "operators-only.yaml"))
	})

	// as returns a client that acts as the user.
	as := func(user string, groups ...string) client.Client { return f.impersonate(t, user, groups...) }
	configMap := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shared"}}
	}
	const denial = `admission webhook "validate.charter.svc-fail" denied the request`
	refused := func(c client.Client, name string) error {
		err := c.Create(ctx, configMap(name), client.DryRunAll)
		if err == nil {
			return errNotYet(name + " admitted")
		}
		if !strings.Contains(err.Error(), denial) || !strings.Contains(err.Error(), "only operators may change ConfigMaps in shared") {
			return err
		}
		return nil
	}
	// Served: a user with no binding is refused.
	eventually(t, "policy enforced", 60*time.Second, func() error { return refused(as("victor"), "probe") })

	tests := []struct {
		name   string
		client client.Client
		admit  bool
	}{
		{"a ClusterRoleBinding to the user gives the cluster role", as("olivia"), true},
		{"a RoleBinding to a group gives the namespace's role", as("edna", "editors"), true},
		{"a RoleBinding to a service account of its namespace", as("system:serviceaccount:shared:builder", "system:serviceaccounts"), true},
		{"a service account of another namespace is not bound", as("system:serviceaccount:other:builder", "system:serviceaccounts"), false},
		{"the same role name in another namespace is another role", as("victor"), false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := "cm-" + strconv.Itoa(i)
			if !tc.admit {
				if err := refused(tc.client, name); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err := tc.client.Create(ctx, configMap(name), client.DryRunAll); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}

	t.Run("removing the binding takes the role away", func(t *testing.T) {
		if err := cl.Delete(ctx, operators); err != nil {
			t.Fatal(err)
		}
		olivia := f.impersonate(t, "olivia")
		eventually(t, "olivia refused", 30*time.Second, func() error { return refused(olivia, "after-unbind") })
	})
}
