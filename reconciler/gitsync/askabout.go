package gitsync

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/charter-dev/charter/reconciler/gitsync/build"
)

// writableBy returns whether the ServiceAccount sa of namespace ns may
// write an object of a revision: patch it (the apply is a server-side
// apply) and create it, where it lives (a namespaced object without a
// namespace lives in ns). The pre-apply check asks the cluster its
// questions (check.AskAbout) only about such objects: what it learns
// (what charter's controllers may do, which GlobalContextEntries are
// Ready) is what policy admission tells whoever writes the object, and
// the API server lets no one reach admission with an object RBAC refuses
// them. A question that cannot be asked (a kind the cluster does not
// serve, a failed review) counts as refused: nothing is told.
func (r *PolicyRepositoryReconciler) writableBy(ctx context.Context, ns, sa string) func(build.Object) bool {
	username := serviceaccount.MakeUsername(ns, sa)
	groups := append(serviceaccount.MakeGroupNames(ns), user.AllAuthenticated)
	// The check and the update check ask about the same objects: each is
	// reviewed once a sync.
	answered := map[string]bool{}
	return func(o build.Object) bool {
		gvk := o.GroupVersionKind()
		key := gvk.String() + "/" + o.GetNamespace() + "/" + o.GetName()
		if allowed, ok := answered[key]; ok {
			return allowed
		}
		allowed := r.mayWrite(ctx, username, groups, ns, o)
		answered[key] = allowed
		return allowed
	}
}

// mayWrite asks whether username (of groups) may patch and create o,
// where it lives.
func (r *PolicyRepositoryReconciler) mayWrite(ctx context.Context, username string, groups []string, ns string, o build.Object) bool {
	gvk := o.GroupVersionKind()
	m, err := r.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false
	}
	namespace := ""
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if namespace = o.GetNamespace(); namespace == "" {
			namespace = ns
		}
	}
	for _, verb := range []string{"patch", "create"} {
		name := o.GetName()
		if verb == "create" {
			name = "" // RBAC does not judge names on create
		}
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: username, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: gvk.Group, Version: gvk.Version,
				Resource: m.Resource.Resource, Namespace: namespace, Name: name},
		}}
		if err := r.Client.Create(ctx, review); err != nil || !review.Status.Allowed {
			return false
		}
	}
	return true
}
