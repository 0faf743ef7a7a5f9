package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/charter-dev/charter/internal/controlplane"
	"github.com/charter-dev/charter/internal/controlplane/controlplanetest"
)

// TestReportsServiceAccountHasKyvernosRights applies
// reports-controller-rbac.yaml as the target does, on the local control
// plane with kube-controller-manager (which fills aggregated
// ClusterRoles), and asks the API server what Kyverno's reports
// ServiceAccount may read: what the suite's RBACPermissionsGranted asserts
// expect (no `deployments` in the core group, no
// `pods/ephemeralcontainers`; namespaces and ConfigMaps, which the ready
// checks of most tests need, and the workloads `view` grants), and that a
// ClusterRole labelled rbac.kyverno.io/aggregate-to-reports-controller, as
// the suite's permissions.yaml files add, widens it.
func TestReportsServiceAccountHasKyvernosRights(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cp := controlplanetest.Start(ctx, t, controlplane.WithControllerManager())
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ns, name, _ := strings.Cut(reportsServiceAccount, "/")
	// charter dev --reports-service-account creates these.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := applyManifest(cp.KubeconfigPath(), "reports-controller-rbac.yaml", io.Discard); err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + ns + ":" + name

	cases := []struct {
		name                          string
		group, resource, sub, verb, n string
		allowed                       bool
	}{
		{"core deployments (autogen/should-not-autogen expects them missing)", "", "deployments", "", "get", "", false},
		{"pods/ephemeralcontainers (block-ephemeral-containers expects it missing)", "", "pods", "ephemeralcontainers", "list", "", false},
		{"apps deployments, from view", "apps", "deployments", "", "watch", "", true},
		{"pods, from view", "", "pods", "", "list", "", true},
		{"namespaces, from the core ClusterRole", "", "namespaces", "", "list", "", true},
		{"configmaps, from the core ClusterRole", "", "configmaps", "", "watch", "", true},
		{"validatingpolicies", "policies.kyverno.io", "validatingpolicies", "", "list", "", true},
		{"secrets elsewhere", "", "secrets", "", "list", "default", false},
		{"secrets in its own namespace, from its Role", "", "secrets", "", "list", ns, true},
		{"clusterroles", "rbac.authorization.k8s.io", "clusterroles", "", "list", "", false},
	}
	// The ClusterRoleBindings name an aggregated ClusterRole that
	// kube-controller-manager fills a moment later: the first answers
	// may still be denials, so what is granted is asked until it holds,
	// and what is not only then.
	for _, wantAllowed := range []bool{true, false} {
		for _, c := range cases {
			if c.allowed != wantAllowed {
				continue
			}
			t.Run(c.name, func(t *testing.T) {
				attrs := authorizationv1.ResourceAttributes{Group: c.group, Resource: c.resource, Subresource: c.sub, Verb: c.verb, Namespace: c.n}
				if c.allowed {
					waitAllowed(ctx, t, cs, user, attrs)
				} else if allowed(ctx, t, cs, user, attrs) {
					t.Errorf("%s may %s %s/%s", user, c.verb, c.resource, c.sub)
				}
			})
		}
	}

	// A test's permissions.yaml (generating-policies/reports/generate-secrets).
	widen := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-widen-reports", Labels: map[string]string{"rbac.kyverno.io/aggregate-to-reports-controller": "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, widen, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAllowed(ctx, t, cs, user, authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list", Namespace: "default"})
}

// allowed asks the API server whether user may do what attrs say.
func allowed(ctx context.Context, t *testing.T, cs kubernetes.Interface, user string, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs}}
	got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Allowed
}

// waitAllowed asks until the answer is yes, failing when ctx ends first
// (aggregation is asynchronous: no fixed delay is assumed).
func waitAllowed(ctx context.Context, t *testing.T, cs kubernetes.Interface, user string, attrs authorizationv1.ResourceAttributes) {
	t.Helper()
	for !allowed(ctx, t, cs, user, attrs) {
		select {
		case <-ctx.Done():
			t.Fatalf("%s still may not %s %s/%s in %q", user, attrs.Verb, attrs.Group, attrs.Resource, attrs.Namespace)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
