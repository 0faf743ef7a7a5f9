package admission

import (
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/charter-dev/charter/clusterstate/policycheck"
	"github.com/charter-dev/charter/webhook/status"
)

// writeAccessPolicies are ClusterPolicies whose rules write with the
// background controller's rights: a generate rule, the same with
// synchronize (update and delete too), a mutate-existing target; and a
// Policy, whose writes are its namespace's ServiceAccount's, checked when
// they run.
const writeAccessPolicies = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: generate-configmap}
spec:
  rules:
  - name: gen
    match: {any: [{resources: {kinds: [Secret]}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: generated
      namespace: team
      data: {data: {a: b}}
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: generate-configmap-sync}
spec:
  rules:
  - name: gen
    match: {any: [{resources: {kinds: [Secret]}}]}
    generate:
      synchronize: true
      apiVersion: v1
      kind: ConfigMap
      name: generated
      namespace: team
      data: {data: {a: b}}
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: mutate-configmap}
spec:
  rules:
  - name: mut
    match: {any: [{resources: {kinds: [Secret]}}]}
    mutate:
      targets:
      - {apiVersion: v1, kind: ConfigMap, namespace: team}
      patchStrategicMerge:
        metadata: {labels: {touched: "yes"}}
---
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: generate-configmap, namespace: team}
spec:
  rules:
  - name: gen
    match: {any: [{resources: {kinds: [Secret]}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: generated
      namespace: team
      data: {data: {a: b}}
`

// TestClusterPolicyWritesNeedTheBackgroundControllersRights: as Kyverno
// refuses a generate or mutate-existing rule its background controller
// may not carry out, /policyvalidate asks the real API server's RBAC
// (SubjectAccessReviews for charter-background) and refuses each
// ClusterPolicy naming the field, the ServiceAccount, the verbs it lacks
// and the resource; once a ClusterRole grants get, create and update on
// ConfigMaps, the generate and mutate-existing policies are admitted and
// the synchronized one is still refused for delete. The namespaced Policy
// is admitted all along: its writes are checked when they run.
func TestClusterPolicyWritesNeedTheBackgroundControllersRights(t *testing.T) {
	const sa = "charter-background"
	username := serviceaccount.MakeUsername(charterNamespace, sa)
	f := startAdmission(t, withNamespaces("team"), withAdminOptions(func(admin *rest.Config, o *Options) {
		o.BackgroundWriter = controllerIdentity(admin, sa)
	}))
	probe := newPolicyProbe(t, f, writeAccessPolicies)

	eventually(t, "generate refused", 30*time.Second, probe.refused("ClusterPolicy/generate-configmap",
		`spec.rules[0].generate: `+username+` requires permissions get,create for resource v1/ConfigMap in namespace team`))
	eventually(t, "synchronized generate refused", 30*time.Second, probe.refused("ClusterPolicy/generate-configmap-sync",
		`spec.rules[0].generate: `+username+` requires permissions get,create,update,delete for resource v1/ConfigMap in namespace team`))
	eventually(t, "mutate-existing refused", 30*time.Second, probe.refused("ClusterPolicy/mutate-configmap",
		`spec.rules[0].mutate.targets[0]: auth check fails, additional privileges are required for the service account '`+username+`': `+
			username+` requires permissions get,update for resource v1/ConfigMap in namespace team`))
	eventually(t, "namespaced Policy admitted", 30*time.Second, probe.admitted("Policy/generate-configmap"))

	grantClusterRole(t, f, "background-configmaps", sa, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"}})
	eventually(t, "generate admitted once granted", 30*time.Second, probe.admitted("ClusterPolicy/generate-configmap"))
	eventually(t, "mutate-existing admitted once granted", 30*time.Second, probe.admitted("ClusterPolicy/mutate-configmap"))
	eventually(t, "synchronized generate still refused for delete", 30*time.Second, probe.refused("ClusterPolicy/generate-configmap-sync",
		`spec.rules[0].generate: `+username+` requires permissions delete for resource v1/ConfigMap in namespace team`))
}

// controllerIdentity asks the API server, as admin, what the
// ServiceAccount sa of charter's namespace may do, as charter serve asks
// about a controller running in another process.
func controllerIdentity(admin *rest.Config, sa string) *policycheck.Writer {
	username := serviceaccount.MakeUsername(charterNamespace, sa)
	cs := kubernetes.NewForConfigOrDie(admin)
	return &policycheck.Writer{User: username, Access: status.SubjectAccess{Client: cs.AuthorizationV1(), User: username,
		Groups: append(serviceaccount.MakeGroupNames(charterNamespace), user.AllAuthenticated)}}
}

// grantClusterRole binds a new ClusterRole name holding rule to the
// ServiceAccount sa of charter's namespace.
func grantClusterRole(t *testing.T, f *fixture, name, sa string, rule rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: charterNamespace, Name: sa}}}
	if err := f.client.Create(f.ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Create(f.ctx, binding); err != nil {
		t.Fatal(err)
	}
}

// policyProbe creates the policies of a multi-document YAML by
// kind/name, each deleted again once admitted, to ask policy admission
// whether it refuses them.
type policyProbe struct {
	f        *fixture
	policies map[string]*unstructured.Unstructured
}

func newPolicyProbe(t *testing.T, f *fixture, docs string) *policyProbe {
	t.Helper()
	p := &policyProbe{f: f, policies: map[string]*unstructured.Unstructured{}}
	for _, doc := range strings.Split(docs, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		p.policies[u.GetKind()+"/"+u.GetName()] = u
	}
	return p
}

func (p *policyProbe) create(key string) error {
	obj := p.policies[key].DeepCopy()
	err := p.f.client.Create(p.f.ctx, obj)
	if err == nil {
		_ = p.f.client.Delete(p.f.ctx, obj)
	}
	return err
}

// refused checks that the policy key is refused with want in the error.
func (p *policyProbe) refused(key, want string) func() error {
	return func() error {
		err := p.create(key)
		if err == nil {
			return fmt.Errorf("%s admitted; want a refusal with %q", key, want)
		}
		if !strings.Contains(err.Error(), want) {
			return fmt.Errorf("%s: %v; want %q", key, err, want)
		}
		return nil
	}
}

// admitted checks that the policy key is admitted.
func (p *policyProbe) admitted(key string) func() error {
	return func() error { return p.create(key) }
}
