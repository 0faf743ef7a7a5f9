package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// devGrantManagedBy labels what --namespaced-policy-role creates, so that
// `kubectl get sa,rolebinding -A -l app.kubernetes.io/managed-by=charter-dev`
// shows every grant charter dev made.
const devGrantManagedBy = "charter-dev"

// namespacedPolicyGrant is charter dev's --namespaced-policy-role: in
// every namespace, now and as namespaces are created, the ServiceAccount
// as which charter acts for the namespace's policies (charter-policy),
// bound to a ClusterRole by a RoleBinding of the same name.
//
// charter never writes for a namespaced policy with its own rights: a
// namespace without that ServiceAccount gets no background write, and the
// policy's status says so (RBACPermissionsGranted False, naming the
// ServiceAccount). Kyverno writes with its own background controller's
// rights instead, so Kyverno's own e2e tests (make conformance-cluster)
// and a developer trying Kyverno's namespaced policies expect the writes
// to happen. This grant gives them that, on a dev cluster only, only when
// asked for, and printed at start: an install never does it, since it
// would give every tenant's policies the rights of the ClusterRole.
type namespacedPolicyGrant struct {
	kube           kubernetes.Interface
	serviceAccount string
	clusterRole    string
	log            logr.Logger
}

// start checks that the ClusterRole exists and grants it in every
// namespace there is before it returns, then in each namespace created
// until ctx ends.
func (g namespacedPolicyGrant) start(ctx context.Context) error {
	if _, err := g.kube.RbacV1().ClusterRoles().Get(ctx, g.clusterRole, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("--namespaced-policy-role %s: %w", g.clusterRole, err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(g.kube, 10*time.Minute)
	namespaces := factory.Core().V1().Namespaces().Informer()
	grantIn := func(obj any) {
		if ns, ok := obj.(*corev1.Namespace); ok {
			g.grant(ctx, ns)
		}
	}
	if _, err := namespaces.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: grantIn,
		// The resync puts back what was deleted (a test that cleans up
		// its namespace's ServiceAccounts).
		UpdateFunc: func(_, obj any) { grantIn(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), namespaces.HasSynced) {
		return fmt.Errorf("--namespaced-policy-role: the namespaces were not listed: %w", ctx.Err())
	}
	return nil
}

// grant creates the ServiceAccount and its RoleBinding in ns, leaving
// those that exist as they are (the user's own stay the user's).
func (g namespacedPolicyGrant) grant(ctx context.Context, ns *corev1.Namespace) {
	if ns.Status.Phase == corev1.NamespaceTerminating {
		return
	}
	labels := map[string]string{"app.kubernetes.io/managed-by": devGrantManagedBy}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: g.serviceAccount, Namespace: ns.Name, Labels: labels}}
	if _, err := g.kube.CoreV1().ServiceAccounts(ns.Name).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		g.log.Error(err, "creating the namespaced policies' ServiceAccount", "namespace", ns.Name, "serviceAccount", g.serviceAccount)
		return
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: g.serviceAccount, Namespace: ns.Name, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: g.clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns.Name, Name: g.serviceAccount}},
	}
	if _, err := g.kube.RbacV1().RoleBindings(ns.Name).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		g.log.Error(err, "binding the namespaced policies' ServiceAccount", "namespace", ns.Name, "clusterRole", g.clusterRole)
	}
}
