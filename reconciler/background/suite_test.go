package background

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/charter-dev/charter/internal/controlplane"
)

// The package's tests share one control plane, started by the first test
// that needs it: starting one per test made the package take minutes.
// Tests run one after the other; each starts from a cluster that
// resetCluster emptied of whatever the test before left (see there), and
// runs its own controllers under its own managers.
var shared struct {
	once   sync.Once
	cp     *controlplane.ControlPlane
	err    error
	cancel context.CancelFunc
	// The resources resetCluster deletes (discoverResources).
	policyKinds, namespacedKinds []schema.GroupVersionResource
}

func TestMain(m *testing.M) {
	// The managers' own logs (controller-runtime's global logger) are not
	// the tests' business; the controllers log through testr.
	ctrl.SetLogger(logr.Discard())
	code := m.Run()
	if shared.cp != nil {
		if code != 0 {
			shared.cp.KeepLogs()
			fmt.Fprintln(os.Stderr, "control plane logs kept in", shared.cp.LogDir())
		}
		_ = shared.cp.Stop()
		shared.cancel()
	}
	os.Exit(code)
}

// sharedControlPlane returns the package's control plane, emptied by
// resetCluster.
func sharedControlPlane(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	fresh := false
	shared.once.Do(func() {
		fresh = true
		root, err := controlplane.ModuleRoot()
		if err != nil {
			shared.err = err
			return
		}
		// The control plane lives as long as the test binary: ctx is
		// cancelled by TestMain only.
		ctx, cancel := context.WithCancel(context.Background())
		shared.cancel = cancel
		shared.cp, shared.err = controlplane.Start(ctx, controlplane.WithCRDs(filepath.Join(root, "config", "crd", "bases")))
		if shared.err != nil {
			cancel()
		}
	})
	if shared.err != nil {
		t.Fatalf("starting the shared control plane: %v", shared.err)
	}
	if fresh {
		// Nothing was made in it yet.
		return shared.cp
	}
	if err := resetCluster(context.Background(), shared.cp.RESTConfig()); err != nil {
		t.Fatalf("emptying the shared control plane: %v", err)
	}
	return shared.cp
}

// systemNamespaces are the API server's own; resetCluster keeps them and
// their objects (except events).
var systemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// resetCluster empties the cluster of what tests make, so that the next
// test sees what a new control plane would show it: every object of the
// policy groups (kyverno.io, policies.kyverno.io) everywhere, every other
// namespace with all its objects, every event, and the ClusterRoles and
// ClusterRoleBindings that are not the API server's bootstrap ones. The
// control plane runs no namespace controller, so a namespace is emptied
// here, resource by resource, and then finalized.
func resetCluster(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if shared.policyKinds == nil {
		// The served resources do not change during the run.
		if shared.policyKinds, shared.namespacedKinds, err = discoverResources(cfg); err != nil {
			return err
		}
	}
	// Policies first: no controller runs now, so nothing acts on their
	// deletion.
	for _, gvr := range shared.policyKinds {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing %s: %w", gvr, err)
		}
		for _, o := range list.Items {
			if err := dyn.Resource(gvr).Namespace(o.GetNamespace()).Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting %s %s/%s: %w", gvr, o.GetNamespace(), o.GetName(), err)
			}
		}
	}
	namespaces, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, ns := range namespaces.Items {
		g.Go(func() error {
			if slices.Contains(systemNamespaces, ns.Name) {
				if err := kube.CoreV1().Events(ns.Name).DeleteCollection(gctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
					return fmt.Errorf("deleting the events of namespace %s: %w", ns.Name, err)
				}
				return nil
			}
			return deleteNamespace(gctx, dyn, kube, ns.Name)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	selector := "kubernetes.io/bootstrapping!=rbac-defaults"
	if err := kube.RbacV1().ClusterRoleBindings().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector}); err != nil {
		return fmt.Errorf("deleting ClusterRoleBindings: %w", err)
	}
	if err := kube.RbacV1().ClusterRoles().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector}); err != nil {
		return fmt.Errorf("deleting ClusterRoles: %w", err)
	}
	return nil
}

// discoverResources lists the resources of the policy groups, and the
// other namespaced resources that can be deleted by collection.
func discoverResources(cfg *rest.Config) (policyKinds, namespacedKinds []schema.GroupVersionResource, err error) {
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	lists, err := disco.ServerPreferredResources()
	if err != nil {
		return nil, nil, err
	}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			switch {
			case gv.Group == "kyverno.io" || gv.Group == "policies.kyverno.io":
				policyKinds = append(policyKinds, gv.WithResource(r.Name))
			case r.Namespaced && slices.Contains(r.Verbs, "deletecollection"):
				namespacedKinds = append(namespacedKinds, gv.WithResource(r.Name))
			}
		}
	}
	return policyKinds, namespacedKinds, nil
}

// deleteNamespace deletes a namespace's objects, then the namespace, and
// waits until it is gone, so the next test can create it again.
func deleteNamespace(ctx context.Context, dyn dynamic.Interface, kube kubernetes.Interface, name string) error {
	for _, gvr := range shared.namespacedKinds {
		if err := dyn.Resource(gvr).Namespace(name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the %s of namespace %s: %w", gvr.Resource, name, err)
		}
	}
	if err := kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting namespace %s: %w", name, err)
	}
	cur, err := kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	cur.Spec.Finalizers = nil
	if _, err := kube.CoreV1().Namespaces().Finalize(ctx, cur, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("finalizing namespace %s: %w", name, err)
	}
	return waitGone(ctx, kube, name)
}

func waitGone(ctx context.Context, kube kubernetes.Interface, namespace string) error {
	for range 100 {
		_, err := kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("namespace %s is still there after being finalized", namespace)
}
