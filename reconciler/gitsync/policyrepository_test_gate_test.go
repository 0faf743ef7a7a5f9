package gitsync

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// gatePolicy requires a label, by a rule whose name does not change with it.
func gatePolicy(label string) string {
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: gate-labels}
spec:
  background: false
  rules:
  - name: require-label
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      failureAction: Audit
      message: "label %s is required"
      pattern: {metadata: {labels: {%s: "?*"}}}
`, label, label)
}

const gateSuite = `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: gate-labels}
policies: [../policy.yaml]
resources: [resources.yaml]
results:
- {policy: gate-labels, rule: require-label, resources: [labelled], result: pass}
- {policy: gate-labels, rule: require-label, resources: [unlabelled], result: fail}
`

const gateResources = `apiVersion: v1
kind: Pod
metadata: {name: labelled, namespace: default, labels: {team: a}}
spec: {containers: [{name: c, image: nginx:1}]}
---
apiVersion: v1
kind: Pod
metadata: {name: unlabelled, namespace: default}
spec: {containers: [{name: c, image: nginx:1}]}
`

// TestTestGate: with spec.test a revision applies only when its own
// kyverno-test.yaml suites pass. A revision whose policy breaks its tests
// applies nothing, is Stalled with reason TestFailed and names the failing
// row; fixing the tests applies it. A repository with no suites under its
// path applies nothing either.
func TestTestGate(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	good := src.commit(map[string]string{
		"policies/policy.yaml":                     gatePolicy("team"),
		"policies/.kyverno-test/kyverno-test.yaml": gateSuite,
		"policies/.kyverno-test/resources.yaml":    gateResources,
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.Path, r.Spec.Test = "policies", true
	})
	readyAt(t, repo, good)
	g.Expect(getPolicy(t, "gate-labels").Spec.Rules[0].Validation.Message).To(Equal("label team is required"))

	broken := src.commit(map[string]string{"policies/policy.yaml": gatePolicy("owner")}, nil)
	got := stalledAt(t, repo, broken)
	ready := condition(got, gitopsv1alpha1.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(gitopsv1alpha1.ReasonTestFailed))
	g.Expect(ready.Message).To(ContainSubstring(`1 test row(s) under "policies" failed: `))
	g.Expect(ready.Message).To(ContainSubstring(`.kyverno-test/kyverno-test.yaml #1 gate-labels/require-label v1/Pod/default/labelled: Want pass, got fail`))
	g.Expect(got.Status.LastAppliedRevision).To(Equal(good))
	g.Expect(getPolicy(t, "gate-labels").Spec.Rules[0].Validation.Message).To(Equal("label team is required"))

	retested := src.commit(map[string]string{"policies/.kyverno-test/resources.yaml": `apiVersion: v1
kind: Pod
metadata: {name: labelled, namespace: default, labels: {owner: a}}
spec: {containers: [{name: c, image: nginx:1}]}
---
apiVersion: v1
kind: Pod
metadata: {name: unlabelled, namespace: default}
spec: {containers: [{name: c, image: nginx:1}]}
`}, nil)
	eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.LastAppliedRevision).To(Equal(retested), "Ready: %+v", condition(r, gitopsv1alpha1.ConditionReady))
	})
	g.Expect(getPolicy(t, "gate-labels").Spec.Rules[0].Validation.Message).To(Equal("label owner is required"))

	// No suites under the path: nothing is applied.
	untested := newGitRepo(t)
	rev := untested.commit(map[string]string{"policies/policy.yaml": policy("gate-untested", "team")}, nil)
	other := newPolicyRepository(t, newNamespace(t), untested.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.Path, r.Spec.Test = "policies", true
	})
	got = stalledAt(t, other, rev)
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Reason).To(Equal(gitopsv1alpha1.ReasonTestFailed))
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Message).To(ContainSubstring("could not run: no kyverno-test.yaml found"))
	g.Expect(getPolicy(t, "gate-untested")).To(BeNil())
}
