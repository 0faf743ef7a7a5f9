package admission

import (
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/clusterstate"
	"github.com/charter-dev/charter/clusterstate/loaders"
)

// deleterPolicy admits a Pod only from a user who may delete Pods in its
// namespace, asked through the CEL authorizer.
const deleterPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: deleters-only
spec:
  background: false
  rules:
  - name: may-delete
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      failureAction: Enforce
      cel:
        expressions:
        - expression: "authorizer.group('').resource('pods').namespace(object.metadata.namespace).check('delete').allowed()"
          message: "only users who may delete pods may create them"
`

// podRole is a Role on Pods in ns with verbs, bound to subjects.
func podRole(ns, name string, verbs []string, subjects ...rbacv1.Subject) (*rbacv1.Role, *rbacv1.RoleBinding) {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: verbs}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: subjects}
	return role, binding
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

// TestCELAuthorizerOnRealAPIServer: the CEL authorizer asks the API server
// (SubjectAccessReview) about the requesting user: a user who may delete
// Pods is admitted and labelled by the mutate rule, one who may only create them is denied with the
// rule's message, a user allowed through a group is admitted (groups
// reach the review), and a grant made later is honoured once the denied
// answer's cache entry expires.
func TestCELAuthorizerOnRealAPIServer(t *testing.T) {
	creators, creatorsBinding := podRole("shop", "pod-creators", []string{"create"},
		userSubject("alice"), userSubject("bob"), userSubject("carol"))
	deleters, deletersBinding := podRole("shop", "pod-deleters", []string{"delete"},
		userSubject("alice"), rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "shop-admins"})
	opts := loaders.DefaultAuthorizerOptions
	opts.AllowTTL, opts.DenyTTL = 2*time.Second, 2*time.Second
	f := startAdmission(t, withNamespaces("shop"),
		withObjects(creators, creatorsBinding, deleters, deletersBinding),
		withOptions(func(o *Options) { o.Events.Disabled = true }),
		withStateOption(func(*rest.Config) clusterstate.Option { return clusterstate.WithCELAuthorizer(opts) }))
	ctx := f.ctx
	f.installReady(t, deleterPolicy)

	create := func(cl client.Client, name string) error {
		return cl.Create(ctx, podIn(name, "shop", nil), client.DryRunAll)
	}
	denied := func(cl client.Client) func() error {
		return func() error {
			err := create(cl, "web")
			if err == nil {
				return errNotYet("admitted")
			}
			if !strings.Contains(err.Error(), `admission webhook "validate.charter.svc-fail" denied the request`) ||
				!strings.Contains(err.Error(), "only users who may delete pods may create them") {
				return err
			}
			return nil
		}
	}
	alice, bob, carol := f.impersonate(t, "alice"), f.impersonate(t, "bob"), f.impersonate(t, "carol", "shop-admins")
	t.Run("a user who may delete pods is admitted", func(t *testing.T) {
		eventually(t, "alice admitted", 30*time.Second, func() error { return create(alice, "web") })
	})
	t.Run("a user who may not is denied", func(t *testing.T) {
		eventually(t, "bob denied", 30*time.Second, denied(bob))
	})
	t.Run("a user allowed through a group is admitted", func(t *testing.T) {
		eventually(t, "carol admitted", 30*time.Second, func() error { return create(carol, "web") })
	})
	t.Run("a later grant is honoured", func(t *testing.T) {
		deletersBinding.Subjects = append(deletersBinding.Subjects, userSubject("bob"))
		if err := f.client.Update(ctx, deletersBinding); err != nil {
			t.Fatal(err)
		}
		eventually(t, "bob admitted after the grant", 30*time.Second, func() error { return create(bob, "web") })
	})
}
