package status

import (
	"context"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
)

// TestReportingConditionAsksTheAPIServer: RBACPermissionsGranted says,
// in Kyverno's words, whether the reports controller's ServiceAccount may
// get, list and watch every resource a policy matches, as the real API
// server's RBAC answers a SubjectAccessReview: True for a policy on Pods
// (granted), False naming each verb on core "deployments" (granted to
// nobody), and True once a role grants what was missing.
func TestReportingConditionAsksTheAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp := controlplanetest.Start(ctx, t)
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig())

	const ns, sa = "charter", "charter-reports"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grant := func(name string, rule rbacv1.PolicyRule) {
		t.Helper()
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	grant("reports-read-pods", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}})
	access := SubjectAccess{Client: cs.AuthorizationV1(), User: serviceaccount.MakeUsername(ns, sa),
		Groups: append(serviceaccount.MakeGroupNames(ns), user.AllAuthenticated)}

	pods := load(t, "vpol-pods.yaml")
	cond, ok, err := reportingCondition(ctx, pods, access, 2)
	if err != nil || !ok {
		t.Fatalf("reportingCondition(pods) = %v, %v", ok, err)
	}
	want := metav1.Condition{Type: policiesv1.ConditionRBACPermissionsGranted, Status: metav1.ConditionTrue,
		Reason: policiesv1.ReasonSucceeded, Message: "Policy is ready for reporting.", ObservedGeneration: 2}
	if cond != want {
		t.Errorf("policy on pods: %+v, want %+v", cond, want)
	}

	both := load(t, "vpol-pods-and-core-deployments.yaml")
	cond, _, err = reportingCondition(ctx, both, access, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Kyverno's message, byte for byte (its chainsaw test
	// validating-policies/autogen/should-not-autogen asserts it).
	want = metav1.Condition{Type: policiesv1.ConditionRBACPermissionsGranted, Status: metav1.ConditionFalse, Reason: policiesv1.ReasonFailed,
		Message:            "Policy is not ready for reporting, missing permissions: get /v1, Resource=deployments: ; list /v1, Resource=deployments: ; watch /v1, Resource=deployments: .",
		ObservedGeneration: 1}
	if cond != want {
		t.Errorf("policy on pods and core deployments:\n got %+v\nwant %+v", cond, want)
	}

	// Granted afterwards: True (each check asks the API server again).
	grant("reports-read-core-deployments", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch"}})
	for {
		cond, _, err = reportingCondition(ctx, both, access, 1)
		if err != nil {
			t.Fatal(err)
		}
		if cond.Status == metav1.ConditionTrue {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("still %+v after the grant", cond)
		case <-time.After(200 * time.Millisecond):
		}
	}

	// A user with no binding at all: an attacker's ServiceAccount named
	// in place of the reports controller's gets nothing.
	stranger := SubjectAccess{Client: cs.AuthorizationV1(), User: serviceaccount.MakeUsername("default", "nobody")}
	if allowed, _, err := stranger.Allowed(ctx, authorizationv1.ResourceAttributes{Verb: "list", Version: "v1", Resource: "pods"}); err != nil || allowed {
		t.Errorf("an unbound ServiceAccount may list pods: %v, %v", allowed, err)
	}
}
