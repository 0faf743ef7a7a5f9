package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/clusterstate"
)

// resourceLibPolicy admits a Pod only when ConfigMap "teams" of its
// namespace lists its team (resource.Get) and exactly one ConfigMap there
// is labelled kind=quota (resource.List with labels).
const resourceLibPolicy = `
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: team-listed}
spec:
  validationActions: [Deny]
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: apps}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  variables:
  - {name: teams, expression: "resource.Get('v1', 'configmaps', object.metadata.namespace, 'teams')"}
  - {name: quotas, expression: "resource.List('v1', 'configmaps', object.metadata.namespace, {'kind': 'quota'})"}
  validations:
  - expression: "dyn(variables.teams) != null && object.metadata.labels.team in variables.teams.data"
    message: "the Pod's team is not listed in ConfigMap teams"
  - expression: "size(variables.quotas.items) == 1"
    message: "want exactly one ConfigMap labelled kind=quota"
`

// TestResourceLibraryAtAdmission: resource.Get and resource.List of a
// ValidatingPolicy read the live objects at admission (Kyverno's resource
// library), not "no resource loader": a Pod of a listed team is admitted,
// another denied, and once the ConfigMap is gone the listed team is
// denied too.
func TestResourceLibraryAtAdmission(t *testing.T) {
	f := startAdmission(t, withNamespaces("apps"))
	ctx, cl := f.ctx, f.client
	teams := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "teams", Namespace: "apps"}, Data: map[string]string{"blue": "yes"}}
	quota := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "quota", Namespace: "apps", Labels: map[string]string{"kind": "quota"}}}
	for _, cm := range []*corev1.ConfigMap{teams, quota} {
		if err := cl.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	f.installReady(t, resourceLibPolicy)
	pod := func(name, team string) *corev1.Pod {
		p := podWithImage(name, "apps", "nginx")
		p.Labels = map[string]string{"team": team}
		return p
	}

	eventually(t, "a Pod of an unlisted team denied", 30*time.Second, deniedBy("validate.charter.svc-fail", "the Pod's team is not listed in ConfigMap teams", func() error {
		return cl.Create(ctx, pod("red", "red"))
	}))
	if err := cl.Create(ctx, pod("blue", "blue")); err != nil {
		t.Fatalf("a Pod of the listed team: %v", err)
	}

	quota2 := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "quota-2", Namespace: "apps", Labels: map[string]string{"kind": "quota"}}}
	if err := cl.Create(ctx, quota2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a second quota ConfigMap read by resource.List", 30*time.Second, deniedBy("validate.charter.svc-fail", "want exactly one ConfigMap labelled kind=quota", func() error {
		return cl.Create(ctx, pod("blue-2", "blue"))
	}))
	if err := cl.Delete(ctx, quota2); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(ctx, teams); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the listed team denied once ConfigMap teams is gone", 30*time.Second, deniedBy("validate.charter.svc-fail", "the Pod's team is not listed in ConfigMap teams", func() error {
		return cl.Create(ctx, pod("blue-3", "blue"))
	}))
}

// sarPolicy denies ConfigMaps in namespace apps once user "nobody" may
// delete namespaces, asking the API server with a SubjectAccessReview
// created through resource.Post.
const sarPolicy = `
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: nobody-powerless}
spec:
  validationActions: [Deny]
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: apps}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  variables:
  - name: review
    expression: >-
      resource.post("authorization.k8s.io/v1", "subjectaccessreviews", {
        "kind": dyn("SubjectAccessReview"), "apiVersion": dyn("authorization.k8s.io/v1"),
        "spec": dyn({"user": dyn("nobody"), "resourceAttributes": dyn({"resource": "namespaces", "verb": "delete"})})
      })
  validations:
  - expression: "has(variables.review.status) && !(has(variables.review.status.allowed) && variables.review.status.allowed)"
    message: "user nobody may delete namespaces"
`

// TestResourcePostAtAdmission: resource.Post creates a SubjectAccessReview
// on the API server at admission and the policy reads its answer: a
// ConfigMap is admitted while "nobody" has no rights, denied once a
// ClusterRoleBinding gives them.
func TestResourcePostAtAdmission(t *testing.T) {
	f := startAdmission(t, withNamespaces("apps"))
	ctx, cl := f.ctx, f.client
	f.installReady(t, sarPolicy)
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps"}}
	}
	if err := cl.Create(ctx, cm("first")); err != nil {
		t.Fatalf("a ConfigMap while nobody is powerless: %v", err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ns-deleter"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"delete"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ns-deleter:nobody"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ns-deleter"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "nobody"}}}
	for _, o := range []client.Object{role, binding} {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	eventually(t, "a ConfigMap denied once nobody may delete namespaces", 30*time.Second, deniedBy("validate.charter.svc-fail", "user nobody may delete namespaces", func() error {
		n++
		return cl.Create(ctx, cm(fmt.Sprintf("second-%d", n)))
	}))
}

// plantQuotaPolicy is a tenant's NamespacedValidatingPolicy that has
// charter create, at admission of any ConfigMap of team-a, a ResourceQuota
// of the ConfigMap's name: what the namespace's admin may not create.
const plantQuotaPolicy = `
apiVersion: policies.kyverno.io/v1
kind: NamespacedValidatingPolicy
metadata: {name: plant-quota, namespace: team-a}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  variables:
  - name: planted
    expression: >-
      resource.Post('v1', 'resourcequotas', {'apiVersion': dyn('v1'), 'kind': dyn('ResourceQuota'),
        'metadata': dyn({'name': object.metadata.name}), 'spec': dyn({'hard': {'pods': '1000'}})})
  validations:
  - expression: "false"
    messageExpression: "'planted ' + string(variables.planted.metadata.name)"
`

// TestNamespacedResourcePostActsAsTheNamespaceServiceAccount: a namespaced
// policy's resource.Post creates as the ServiceAccount charter-policy of
// its namespace, impersonated, never with charter's identity (here the
// control plane's administrator): without the ServiceAccount nothing is
// created and the error names it; with it, RBAC decides (a Role without
// resourcequotas create: forbidden, naming the ServiceAccount); once its
// owner grants it, the policy creates what it asks.
func TestNamespacedResourcePostActsAsTheNamespaceServiceAccount(t *testing.T) {
	const ns, sa = "team-a", "charter-policy"
	f := startAdmission(t, withNamespaces(ns), withStateOption(func(*rest.Config) clusterstate.Option {
		return clusterstate.WithNamespacedPolicyServiceAccount(sa)
	}))
	ctx, cl := f.ctx, f.client
	f.installReady(t, plantQuotaPolicy)
	quotaCreated := func(name string) bool {
		err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ResourceQuota{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	cm := func(name string) func() error {
		return func() error {
			return cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
		}
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}}}
	for _, step := range []struct {
		name, message string
		before        func()
		created       bool
	}{
		{name: "no-serviceaccount", message: "ServiceAccount " + ns + "/" + sa + " does not exist"},
		{name: "forbidden", message: `as ServiceAccount ` + ns + `/` + sa, before: func() {
			for _, o := range []client.Object{
				&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}},
				role,
				&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa},
					RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
					Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}},
			} {
				if err := cl.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "granted", message: "planted granted", created: true, before: func() {
			role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"resourcequotas"}, Verbs: []string{"create"}})
			if err := cl.Update(ctx, role); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		if step.before != nil {
			step.before()
		}
		// A namespaced policy's webhook is named after its namespaces'
		// hash: validate.charter.svc-fail-namespaced-<hash>.
		create := cm(step.name)
		eventually(t, step.name, 30*time.Second, func() error {
			err := create()
			if err == nil {
				return errNotYet("admitted")
			}
			if !strings.Contains(err.Error(), `admission webhook "validate.charter.svc-fail-namespaced-`) || !strings.Contains(err.Error(), step.message) {
				return err
			}
			return nil
		})
		if got := quotaCreated(step.name); got != step.created {
			t.Fatalf("%s: ResourceQuota %s/%s created: %v, want %v", step.name, ns, step.name, got, step.created)
		}
	}
}
