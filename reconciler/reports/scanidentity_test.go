package reports

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestScansReadAsTheServiceAccount: with Options.ServiceAccount, scans
// read what they evaluate as that ServiceAccount, as Kyverno's reports
// controller reads with its own rights: on the real API server, a Pod it
// may not list is not scanned (no report), and once a ClusterRole grants
// get, list and watch on Pods the next full rescan reports it. Reports
// are still written with the controller's identity (the ServiceAccount
// may not write any).
func TestScansReadAsTheServiceAccount(t *testing.T) {
	e := startEnv(t)
	const ns, sa = "reports-test", "scanner"
	if _, err := e.cs.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.CoreV1().ServiceAccounts(ns).Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := e.apply("pod.yaml")
	c, _ := e.startController(Options{ServiceAccount: ns + "/" + sa})
	e.apply("require-team.yaml")
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	e.eventually("the policy's Pods watched", func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.watchers[pods] == nil {
			return fmt.Errorf("no watcher of Pods yet")
		}
		return nil
	})
	// A full rescan reads nothing the ServiceAccount may not list, and
	// says so.
	if err := c.FullRescan(e.ctx); !apierrors.IsForbidden(err) {
		t.Fatalf("full rescan: %v, want Forbidden", err)
	}
	if ok, got := e.reportExists(ns, pod.GetUID()); ok {
		t.Fatalf("the Pod was scanned as a ServiceAccount that may not read Pods: report %v", got)
	}

	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "scanner-pods"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := e.cs.RbacV1().ClusterRoles().Create(e.ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scanner-pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}}
	if _, err := e.cs.RbacV1().ClusterRoleBindings().Create(e.ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the Pod's report once the ServiceAccount may read Pods", func() error {
		// The Pod controllers of the policy's autogen rules stay
		// forbidden.
		_ = c.FullRescan(e.ctx)
		_, _, err := e.results(ns, string(pod.GetUID()))
		return err
	})
	e.wantResults("the Pod's result", ns, string(pod.GetUID()), "require-team/team-label=fail")
}
