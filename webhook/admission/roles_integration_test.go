package admission

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/charter-dev/charter/internal/controlplane"
)

// operatorsOnly lets only holders of the cluster-operator ClusterRole or
// of the shared:editor Role write ConfigMaps in the shared namespace.
const operatorsOnly = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: operators-only}
spec:
  validationFailureAction: Enforce
  background: false
  rules:
  - name: deny-others
    match: {any: [{resources: {kinds: [ConfigMap], namespaces: [shared]}}]}
    exclude:
      any:
      - clusterRoles: [cluster-operator]
      - roles: ["shared:editor"]
    validate:
      message: "only operators may change ConfigMaps in shared"
      deny: {}
`

// TestRolesOnRealAPIServer checks that match/exclude by roles and
// clusterRoles sees the requester's RoleBindings and ClusterRoleBindings,
// for users, groups and service accounts, and follows binding changes.
func TestRolesOnRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and kube-apiserver")
	}
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "kube-apiserver")); err != nil {
		t.Skipf("control plane binaries not built (make controlplane): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cp, err := controlplane.Start(ctx, controlplane.WithCRDs(filepath.Join(root, "config", "crd", "bases")))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			cp.KeepLogs()
			t.Logf("control plane logs kept in %s", cp.LogDir())
		}
		_ = cp.Stop()
	}()

	sch := scheme(t)
	cl, err := client.New(cp.RESTConfig(), client.Options{Scheme: sch})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{charterNamespace, "shared"} {
		must(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	ref := func(kind, name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
	}
	operators := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "olivia-operator"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "olivia"}},
		RoleRef:  ref("ClusterRole", "cluster-operator")}
	for _, obj := range []client.Object{
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
	} {
		must(cl.Create(ctx, obj))
	}

	mgr, err := ctrl.NewManager(cp.RESTConfig(), ctrl.Options{
		Scheme:  sch,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{charterNamespace: {}}},
		}},
		Logger: testr.New(t),
	})
	must(err)
	port := freePort(t)
	_, err = Setup(mgr, Options{
		Addr:         "127.0.0.1:" + strconv.Itoa(port),
		URL:          "https://127.0.0.1:" + strconv.Itoa(port),
		Namespace:    charterNamespace,
		ConfigResync: time.Second,
		Events:       EventOptions{Disabled: true},
		Log:          testr.New(t),
	})
	must(err)
	mgrDone := make(chan error, 1)
	mgrCtx, stopMgr := context.WithCancel(ctx)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	defer func() { stopMgr(); <-mgrDone }()

	// The policy goes in once the policy webhook answers.
	eventually(t, "policy created", 30*time.Second, func() error {
		return cl.Create(ctx, policyFrom(t, operatorsOnly))
	})

	// as returns a client that acts as the user.
	as := func(user string, groups ...string) client.Client {
		cfg := rest.CopyConfig(cp.RESTConfig())
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
		c, err := client.New(cfg, client.Options{Scheme: sch})
		must(err)
		return c
	}
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
		must(cl.Delete(ctx, operators))
		eventually(t, "olivia refused", 30*time.Second, func() error { return refused(as("olivia"), "after-unbind") })
	})
}
