package gitsync

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	kyvernov2 "github.com/charter-dev/charter/api/kyverno/v2"
	"github.com/charter-dev/charter/reconciler/gitsync/apply"
)

// The tenancy tests run against the suite's API server with RBAC on: the
// manager is cluster admin, and a tenant's ServiceAccount may do only what
// a test binds it.

// namespacedPolicy is a valid Policy; an empty namespace leaves
// metadata.namespace out.
func namespacedPolicy(ns, name string) string {
	meta := "name: " + name
	if ns != "" {
		meta += ", namespace: " + ns
	}
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: Policy
metadata: {%s}
spec:
  rules:
  - name: require-name
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {failureAction: Audit, message: m, pattern: {metadata: {name: "?*"}}}
`, meta)
}

// exception is a PolicyException in ns for policy.
func exception(ns, name, policy string) string {
	return fmt.Sprintf(`apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: %s, namespace: %s}
spec:
  exceptions: [{policyName: %s, ruleNames: [require-team]}]
  match: {any: [{resources: {kinds: [Pod], namespaces: [%s]}}]}
`, name, ns, policy, ns)
}

// getNamespaced returns obj from the API server, or nil when it does not
// exist.
func getNamespaced[T client.Object](t *testing.T, obj T, ns, name string) T {
	t.Helper()
	var zero T
	if err := testClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return zero
		}
		t.Fatal(err)
	}
	return obj
}

func stalledWith(t *testing.T, repo *gitopsv1alpha1.PolicyRepository, revision, reason string) *gitopsv1alpha1.PolicyRepository {
	t.Helper()
	return eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.LastAttemptedRevision).To(Equal(revision))
		g.Expect(condition(r, gitopsv1alpha1.ConditionStalled)).To(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", reason)))
		g.Expect(condition(r, gitopsv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
	})
}

// A repository outside charter's namespace without a ServiceAccount may
// write only namespaced objects of its own namespace: a revision holding a
// ClusterPolicy or a PolicyException for another namespace stalls, naming
// each, and nothing of it is applied, its valid Policy included.
func TestTenantWithoutServiceAccountWritesOnlyItsOwnNamespace(t *testing.T) {
	g := NewWithT(t)
	ns, other := newTenantNamespace(t), newTenantNamespace(t)
	src := newGitRepo(t)
	bad := src.commit(map[string]string{
		"policies/own.yaml":       namespacedPolicy(ns, "tenant-own"),
		"policies/cluster.yaml":   policy("tenant-cluster", "team"),
		"policies/exception.yaml": exception(other, "tenant-exempt", "tenant-cluster"),
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) { r.Spec.ServiceAccountName = "" })

	got := stalledWith(t, repo, bad, gitopsv1alpha1.ReasonNotPermitted)
	msg := condition(got, gitopsv1alpha1.ConditionReady).Message
	g.Expect(msg).To(ContainSubstring("without a ServiceAccount"))
	g.Expect(msg).To(ContainSubstring("policies/cluster.yaml: ClusterPolicy/tenant-cluster: cluster-scoped"))
	g.Expect(msg).To(ContainSubstring(fmt.Sprintf("policies/exception.yaml: PolicyException/%s/tenant-exempt is in namespace %s", other, other)))
	g.Expect(msg).NotTo(ContainSubstring("own.yaml"))
	g.Expect(got.Status.LastAppliedRevision).To(BeEmpty())
	g.Expect(getPolicy(t, "tenant-cluster")).To(BeNil())
	g.Expect(getNamespaced(t, &kyvernov2.PolicyException{}, other, "tenant-exempt")).To(BeNil())
	g.Expect(getNamespaced(t, &kyvernov1.Policy{}, ns, "tenant-own")).To(BeNil())

	// Its own namespace's Policy alone applies, with charter's identity;
	// one that names no namespace lands in the repository's.
	good := src.commit(map[string]string{
		"policies/cluster.yaml":   "",
		"policies/exception.yaml": "",
		"policies/unnamed.yaml":   namespacedPolicy("", "tenant-unnamed"),
	}, nil)
	got = readyAt(t, repo, good)
	g.Expect(condition(got, gitopsv1alpha1.ConditionStalled).Status).To(BeEquivalentTo("Absent"))
	g.Expect(getNamespaced(t, &kyvernov1.Policy{}, ns, "tenant-own")).NotTo(BeNil())
	g.Expect(getNamespaced(t, &kyvernov1.Policy{}, ns, "tenant-unnamed")).NotTo(BeNil())
}

// A repository with a ServiceAccount writes as it: what the
// ServiceAccount's RBAC allows applies; a revision with anything it may
// not write, or prune, stalls with the API server's refusal (verb,
// resource, namespace) and the file, and nothing of it is applied.
func TestTenantServiceAccountRBACDecidesWhatApplies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newTenantNamespace(t)
	// The deployer may write Policies in its namespace, but not delete
	// them, and nothing else.
	grantPolicyWriter(t, ns, "get", "list", "watch", "create", "update", "patch")

	src := newGitRepo(t)
	rev1 := src.commit(map[string]string{"policies/a.yaml": namespacedPolicy(ns, "sa-a")}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) { r.Spec.ServiceAccountName = "deployer" })
	readyAt(t, repo, rev1)
	a := getNamespaced(t, &kyvernov1.Policy{}, ns, "sa-a")
	g.Expect(a).NotTo(BeNil())
	g.Expect(a.ManagedFields).To(ContainElement(HaveField("Manager", apply.FieldManagerOf(client.ObjectKeyFromObject(repo)))))

	// A ClusterPolicy next to an allowed Policy: neither applies.
	rev2 := src.commit(map[string]string{
		"policies/b.yaml":       namespacedPolicy(ns, "sa-b"),
		"policies/cluster.yaml": policy("sa-cluster", "team"),
	}, nil)
	got := stalledWith(t, repo, rev2, gitopsv1alpha1.ReasonForbidden)
	msg := condition(got, gitopsv1alpha1.ConditionReady).Message
	g.Expect(msg).To(ContainSubstring("applied as ServiceAccount " + ns + "/deployer"))
	g.Expect(msg).To(ContainSubstring("policies/cluster.yaml: ClusterPolicy/sa-cluster:"))
	g.Expect(msg).To(ContainSubstring(fmt.Sprintf(`User "system:serviceaccount:%s:deployer" cannot patch resource "clusterpolicies" in API group "kyverno.io" at the cluster scope`, ns)))
	g.Expect(got.Status.LastAppliedRevision).To(Equal(rev1))
	g.Expect(getPolicy(t, "sa-cluster")).To(BeNil())
	g.Expect(getNamespaced(t, &kyvernov1.Policy{}, ns, "sa-b")).To(BeNil())

	// Dropping a Policy the deployer may not delete stalls before the
	// new one is written.
	rev3 := src.commit(map[string]string{"policies/cluster.yaml": "", "policies/a.yaml": ""}, nil)
	got = stalledWith(t, repo, rev3, gitopsv1alpha1.ReasonForbidden)
	msg = condition(got, gitopsv1alpha1.ConditionReady).Message
	g.Expect(msg).To(ContainSubstring(fmt.Sprintf("prune of Policy/%s/sa-a:", ns)))
	g.Expect(msg).To(ContainSubstring(fmt.Sprintf(`cannot delete resource "policies" in API group "kyverno.io" in the namespace "%s"`, ns)))
	g.Expect(getNamespaced(t, &kyvernov1.Policy{}, ns, "sa-a")).NotTo(BeNil())
	g.Expect(getNamespaced(t, &kyvernov1.Policy{}, ns, "sa-b")).To(BeNil())

	// Granting delete is the fix: the same revision applies at the next
	// retry, without a new commit.
	var role rbacv1.Role
	g.Expect(testClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "policy-writer"}, &role)).To(Succeed())
	role.Rules[0].Verbs = append(role.Rules[0].Verbs, "delete")
	g.Expect(testClient.Update(ctx, &role)).To(Succeed())
	readyAt(t, repo, rev3)
	g.Expect(getNamespaced(t, &kyvernov1.Policy{}, ns, "sa-a")).To(BeNil())
	g.Expect(getNamespaced(t, &kyvernov1.Policy{}, ns, "sa-b")).NotTo(BeNil())
}

// A repository in charter's namespace keeps writing with charter's own
// identity: cluster-wide policy is what it is for.
func TestPlatformRepositoryWritesAsCharter(t *testing.T) {
	g := NewWithT(t)
	src := newGitRepo(t)
	rev := src.commit(map[string]string{
		"cluster.yaml":   policy("platform-cluster", "team"),
		"exception.yaml": exception("default", "platform-exempt", "platform-cluster"),
	}, nil)
	repo := newPolicyRepository(t, charterNamespace, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) {
		r.Name = "platform"
		r.Spec.ServiceAccountName = ""
	})
	readyAt(t, repo, rev)
	g.Expect(getPolicy(t, "platform-cluster")).NotTo(BeNil())
	g.Expect(getNamespaced(t, &kyvernov2.PolicyException{}, "default", "platform-exempt")).NotTo(BeNil())
}
