package gitsync

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// secretGeneratingPolicy generates a Secret into each new Namespace,
// which the suite's background ServiceAccount may not create.
const secretGeneratingPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: clustercheck-secret
spec:
  rules:
  - name: pull-secret
    match:
      any:
      - resources:
          kinds: [Namespace]
    generate:
      apiVersion: v1
      kind: Secret
      name: pull-secret
      namespace: "{{ request.object.metadata.name }}"
      data: {data: {token: dG9rZW4=}}
`

// TestBackgroundRightsStallTheRevision: a revision whose ClusterPolicy
// generates a kind charter's background controller may not create is
// Stalled naming the file, the policy and the rule's field, with
// Kyverno's message, as policy admission refuses it; the previous
// revision stays applied, and nothing of the refused one is.
func TestBackgroundRightsStallTheRevision(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	good := src.commit(map[string]string{"policies/a.yaml": policy("clustercheck-a", "team")}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	readyAt(t, repo, good)

	bad := src.commit(map[string]string{
		"policies/a.yaml":      policy("clustercheck-a", "changed"),
		"policies/secret.yaml": secretGeneratingPolicy,
	}, nil)
	got := stalledAt(t, repo, bad)
	ready := condition(got, gitopsv1alpha1.ConditionReady)
	g.Expect(ready.Reason).To(Equal(gitopsv1alpha1.ReasonValidationFailed))
	g.Expect(ready.Message).To(ContainSubstring(`policies/secret.yaml: ClusterPolicy "clustercheck-secret": spec.rules[0].generate: ` +
		backgroundUser + ` requires permissions get,create for resource v1/Secret`))
	g.Expect(got.Status.LastAppliedRevision).To(Equal(good))
	g.Expect(getPolicy(t, "clustercheck-a").Spec.Rules[0].Name).To(Equal("require-team"))
	g.Expect(getPolicy(t, "clustercheck-secret")).To(BeNil())

	// A ConfigMap, which the background controller may write, applies.
	fixed := src.commit(map[string]string{"policies/secret.yaml": generatePolicy("clustercheck-secret", "marked")}, nil)
	readyAt(t, repo, fixed)
	g.Expect(getPolicy(t, "clustercheck-a").Spec.Rules[0].Name).To(Equal("require-changed"))
}

// syncGeneratingPolicy is a Policy of namespace ns whose synchronized
// generate rule writes kind there.
func syncGeneratingPolicy(ns, kind string) string {
	return `apiVersion: kyverno.io/v1
kind: Policy
metadata:
  name: clustercheck-sync
  namespace: ` + ns + `
spec:
  rules:
  - name: copy
    match:
      any:
      - resources:
          kinds: [Pod]
    generate:
      synchronize: true
      apiVersion: v1
      kind: ` + kind + `
      name: copy
      namespace: ` + ns + `
      data: {data: {a: b}}
`
}

// TestAdmissionReadsStallTheRevision: a revision whose Policy has a
// synchronized generate rule writing a kind the identity serving policy
// admission (charter-admission) may not list and get is Stalled naming
// the file, the policy and the rule's field in Kyverno's words, as policy
// admission refuses it, and nothing of it applies; a ConfigMap, which
// that identity may list and get, applies.
func TestAdmissionReadsStallTheRevision(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	bad := src.commit(map[string]string{
		"policies/a.yaml":    policy("clustercheck-sync-a", "team"),
		"policies/sync.yaml": syncGeneratingPolicy(ns, "Secret"),
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	got := stalledAt(t, repo, bad)
	ready := condition(got, gitopsv1alpha1.ConditionReady)
	g.Expect(ready.Reason).To(Equal(gitopsv1alpha1.ReasonValidationFailed))
	g.Expect(ready.Message).To(ContainSubstring(`policies/sync.yaml: Policy "` + ns + `/clustercheck-sync": spec.rules[0].generate: ` +
		admissionUser + ` requires permissions list,get for resource v1/Secret in namespace ` + ns))
	g.Expect(got.Status.LastAppliedRevision).To(BeEmpty())
	g.Expect(getPolicy(t, "clustercheck-sync-a")).To(BeNil())

	fixed := src.commit(map[string]string{"policies/sync.yaml": syncGeneratingPolicy(ns, "ConfigMap")}, nil)
	readyAt(t, repo, fixed)
	g.Expect(getPolicy(t, "clustercheck-sync-a")).NotTo(BeNil())
}

// TestCleanupRightsStallTheRevision: a revision whose ClusterCleanupPolicy
// matches a kind charter's cleanup controller may not delete is Stalled
// naming the file, the policy and the kind's field, in Kyverno's words, as
// policy admission refuses it, and nothing of it applies; ConfigMaps,
// which it may delete and list, apply.
func TestCleanupRightsStallTheRevision(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	cleanup := func(kind string) string {
		return `apiVersion: kyverno.io/v2
kind: ClusterCleanupPolicy
metadata:
  name: clustercheck-cleanup
spec:
  schedule: "0 * * * *"
  match:
    any:
    - resources:
        kinds: [` + kind + `]
        names: [stale]
`
	}
	bad := src.commit(map[string]string{
		"policies/a.yaml":      policy("clustercheck-cleanup-a", "team"),
		"cleanup/cleanup.yaml": cleanup("Pod"),
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	got := stalledAt(t, repo, bad)
	ready := condition(got, gitopsv1alpha1.ConditionReady)
	g.Expect(ready.Reason).To(Equal(gitopsv1alpha1.ReasonValidationFailed))
	g.Expect(ready.Message).To(ContainSubstring(`cleanup/cleanup.yaml: ClusterCleanupPolicy "clustercheck-cleanup": ` +
		`spec.match.any[0].resources.kinds[0]: cleanup controller has no permission to delete kind Pod`))
	g.Expect(got.Status.LastAppliedRevision).To(BeEmpty())
	g.Expect(getPolicy(t, "clustercheck-cleanup-a")).To(BeNil())

	fixed := src.commit(map[string]string{"cleanup/cleanup.yaml": cleanup("ConfigMap")}, nil)
	readyAt(t, repo, fixed)
	g.Expect(getPolicy(t, "clustercheck-cleanup-a")).NotTo(BeNil())
}

// TestClusterWarningsOfPolicyAdmission: the warnings policy admission
// gives from what it asks the cluster are given for a revision too, in
// its Ready message and as PolicyWarning events naming the file: a
// globalReference to a GlobalContextEntry that does not exist, and a
// validate.cel expression reading a field the matched kind's OpenAPI
// schema does not have. The revision applies, as policy admission admits
// both.
func TestClusterWarningsOfPolicyAdmission(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	rev := src.commit(map[string]string{
		"global.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: clustercheck-global
spec:
  background: false
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - name: registries
      globalReference: {name: clustercheck-no-such-entry}
    validate:
      failureAction: Audit
      deny: {conditions: {any: [{key: "{{ registries }}", operator: Equals, value: none}]}}
`,
		"cel.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: clustercheck-cel
spec:
  background: false
  rules:
  - name: few-replicas
    match: {any: [{resources: {kinds: [apps/v1/Deployment]}}]}
    validate:
      failureAction: Audit
      cel:
        expressions:
        - expression: "object.spec.replicaz <= 5"
`}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	got := readyAt(t, repo, rev)
	const (
		globalWarning = "Global context entry clustercheck-no-such-entry does not exist or is not ready"
		celWarning    = "spec.rules[0].validate.cel.expressions[0].expression:"
	)
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Message).To(And(
		ContainSubstring("2 policy warnings"),
		ContainSubstring(`global.yaml: ClusterPolicy "clustercheck-global": `+globalWarning),
		ContainSubstring(`cel.yaml: ClusterPolicy "clustercheck-cel": `+celWarning),
		ContainSubstring("undefined field 'replicaz'")))
	g.Expect(getPolicy(t, "clustercheck-global")).NotTo(BeNil())
	g.Expect(getPolicy(t, "clustercheck-cel")).NotTo(BeNil())
	g.Eventually(func(g Gomega) []eventsv1.Event {
		var out []eventsv1.Event
		for _, e := range repositoryEvents(g, ns) {
			if e.Reason == EventPolicyWarning {
				out = append(out, e)
			}
		}
		return out
	}).WithTimeout(waitTimeout).Should(ContainElements(
		And(HaveField("Type", corev1.EventTypeWarning), HaveField("Note", And(ContainSubstring("global.yaml"), ContainSubstring(globalWarning)))),
		And(HaveField("Type", corev1.EventTypeWarning), HaveField("Note", And(ContainSubstring("cel.yaml"), ContainSubstring(celWarning)))),
	))
}

// TestTenantIsToldOnlyOfWhatItMayWrite: the pre-apply check asks the
// cluster (charter's controllers' rights, GlobalContextEntries) with
// gitsync's own identity, so a tenant's repository is told its answers
// only of the objects the repository's ServiceAccount may write, as
// policy admission tells them only to whoever writes them. A
// ClusterCleanupPolicy the ServiceAccount may not write is not asked
// about: the revision stalls on the API server's refusal, and the
// cleanup controller's rights are not told; a Policy it may write is
// asked about, and refused in the words admission gives the
// ServiceAccount.
func TestTenantIsToldOnlyOfWhatItMayWrite(t *testing.T) {
	g := NewWithT(t)
	ns := newTenantNamespace(t)
	grantPolicyWriter(t, ns, "get", "list", "watch", "create", "update", "patch", "delete")
	src := newGitRepo(t)
	rev := src.commit(map[string]string{
		"policies/own.yaml": namespacedPolicy(ns, "told-own"),
		"cleanup/secrets.yaml": `apiVersion: kyverno.io/v2
kind: ClusterCleanupPolicy
metadata:
  name: told-secrets
spec:
  schedule: "0 * * * *"
  match:
    any:
    - resources:
        kinds: [Secret]
`,
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) { r.Spec.ServiceAccountName = "deployer" })
	got := stalledWith(t, repo, rev, gitopsv1alpha1.ReasonForbidden)
	msg := condition(got, gitopsv1alpha1.ConditionReady).Message
	g.Expect(msg).To(ContainSubstring(fmt.Sprintf(`User "system:serviceaccount:%s:deployer" cannot patch resource "clustercleanuppolicies"`, ns)))
	g.Expect(msg).NotTo(ContainSubstring("cleanup controller"))

	rev = src.commit(map[string]string{"cleanup/secrets.yaml": "", "policies/sync.yaml": syncGeneratingPolicy(ns, "Secret")}, nil)
	got = stalledWith(t, repo, rev, gitopsv1alpha1.ReasonValidationFailed)
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Message).To(ContainSubstring(`policies/sync.yaml: Policy "` + ns + `/clustercheck-sync": spec.rules[0].generate: ` +
		admissionUser + ` requires permissions list,get for resource v1/Secret in namespace ` + ns))
}
