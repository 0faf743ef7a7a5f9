package gitsync

import (
	"fmt"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/reconciler/gitsync/build"
	"github.com/charter-dev/charter/reconciler/gitsync/inventory"
)

// Tenancy configures who a PolicyRepository writes as, as Flux's
// kustomize-controller does (--default-service-account,
// --no-cross-namespace-refs).
type Tenancy struct {
	// Namespace is charter's own namespace. Its repositories are the
	// platform team's: without spec.serviceAccountName they write with
	// charter's own identity, anywhere its role allows. Required.
	Namespace string
	// DefaultServiceAccount is impersonated for a repository outside
	// Namespace whose spec.serviceAccountName is empty.
	DefaultServiceAccount string
	// NoCrossNamespaceRefs confines every repository outside Namespace to
	// namespaced objects of its own namespace, whatever its ServiceAccount
	// may do.
	NoCrossNamespaceRefs bool
	// AllowFileURLs lets repositories of every namespace use file://
	// URLs, which read charter's own disk (charter dev sets it: its
	// repositories are folders of the developer's machine). Without it,
	// only repositories in Namespace may.
	AllowFileURLs bool
	// AllowNamespacedCalls admits revisions with namespaced policies that
	// call out (apiCall service URLs, CEL http), as policy admission does
	// under charter serve --allow-http-in-namespaced-policies; off, the
	// pre-apply check refuses them (check.AllowNamespacedCalls).
	AllowNamespacedCalls bool
}

// checkURL refuses a file:// URL of a repository outside charter's
// namespace: it would have charter read any Git repository on its own
// disk (another repository's checkout in its cache, a mounted volume) and
// apply it as the tenant.
func (t Tenancy) checkURL(obj *gitopsv1alpha1.PolicyRepository) error {
	if t.AllowFileURLs || obj.Namespace == t.Namespace {
		return nil
	}
	if u, err := url.Parse(obj.Spec.URL); err == nil && strings.EqualFold(u.Scheme, "file") {
		return fmt.Errorf("spec.url: a file:// URL reads charter's own disk; only repositories in charter's namespace %s may use one (or under charter dev), not one in %s", t.Namespace, obj.Namespace)
	}
	return nil
}

// writer is who one repository writes as and where it may write.
type writer struct {
	// serviceAccount, when set, is impersonated for every write, dry-run
	// and prune of the repository: Kubernetes RBAC decides.
	serviceAccount string
	// ownNamespaceOnly confines the repository to namespaced objects of
	// its own namespace; why says which rule does.
	ownNamespaceOnly bool
	why              string
}

// writerOf decides who obj writes as.
func (t Tenancy) writerOf(obj *gitopsv1alpha1.PolicyRepository) writer {
	platform := obj.Namespace == t.Namespace
	w := writer{serviceAccount: obj.Spec.ServiceAccountName}
	if w.serviceAccount == "" && !platform {
		w.serviceAccount = t.DefaultServiceAccount
	}
	switch {
	case platform:
	case t.NoCrossNamespaceRefs:
		w.ownNamespaceOnly = true
		w.why = "with --no-cross-namespace-refs, a PolicyRepository outside charter's namespace writes only namespaced objects of its own namespace " + obj.Namespace
	case w.serviceAccount == "":
		w.ownNamespaceOnly = true
		w.why = "a PolicyRepository outside charter's namespace without a ServiceAccount (spec.serviceAccountName, or serve --default-service-account) writes only namespaced objects of its own namespace " + obj.Namespace
	}
	return w
}

// impersonating returns a client of cfg that acts as the ServiceAccount
// namespace/name. It reads nothing from a cache: the ServiceAccount may
// not list or watch what it writes.
func impersonating(cfg *rest.Config, c client.Client, namespace, name string) (client.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceaccount.MakeUsername(namespace, name)}
	return client.New(cfg, client.Options{Scheme: c.Scheme(), Mapper: c.RESTMapper()})
}

// NotPermittedError lists what a revision would write, or prune, where its
// repository may not.
type NotPermittedError struct {
	// Why is the rule that confines the repository.
	Why string
	// Objects are "file: Kind/namespace/name: reason" (no file for a
	// prune).
	Objects []string
}

func (e *NotPermittedError) Error() string {
	return fmt.Sprintf("%s; nothing applied: %s", e.Why, strings.Join(e.Objects, "; "))
}

// checkOwnNamespace returns a *NotPermittedError when an object of objs,
// or a stale inventory entry to prune, is cluster-scoped or in another
// namespace than namespace. Namespaced objects that name no namespace are
// put in namespace. A kind the API server does not serve is refused:
// whether it is namespaced cannot be told.
func checkOwnNamespace(mapper meta.RESTMapper, namespace, why string, objs []build.Object, stale []gitopsv1alpha1.ResourceRef) error {
	var refused []string
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		at := o.File + ": " + gvk.Kind + "/" + o.GetName()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			refused = append(refused, fmt.Sprintf("%s: kind %s is not served, so it cannot be told namespaced: %v", at, gvk.GroupKind(), err))
			continue
		}
		if m.Scope.Name() == meta.RESTScopeNameRoot {
			refused = append(refused, at+": cluster-scoped")
			continue
		}
		if o.GetNamespace() == "" {
			o.SetNamespace(namespace)
		}
		if ns := o.GetNamespace(); ns != namespace {
			refused = append(refused, fmt.Sprintf("%s: %s/%s/%s is in namespace %s", o.File, gvk.Kind, ns, o.GetName(), ns))
		}
	}
	for _, ref := range stale {
		u, err := inventory.Object(ref)
		if err != nil {
			return err
		}
		switch ns := u.GetNamespace(); {
		case ns == "":
			refused = append(refused, fmt.Sprintf("prune of %s/%s: cluster-scoped", u.GetKind(), u.GetName()))
		case ns != namespace:
			refused = append(refused, fmt.Sprintf("prune of %s/%s/%s: in namespace %s", u.GetKind(), ns, u.GetName(), ns))
		}
	}
	if len(refused) > 0 {
		return &NotPermittedError{Why: why, Objects: refused}
	}
	return nil
}
