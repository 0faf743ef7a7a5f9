package gitsync

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// assertPolicy uses validate.assert, which charter cannot run.
func assertPolicy(name, action string) string {
	return `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: ` + name + `
spec:
  background: false
  validationFailureAction: ` + action + `
  rules:
  - name: signed
    match:
      any:
      - resources:
          kinds: [Deployment]
    validate:
      assert: {object: {spec: {}}}
`
}

// TestEnforcedUnsupportedFeatureStallsTheRevision: a revision holding an
// Enforce policy that charter cannot run in the cluster is Stalled with
// the file and field, and nothing of it is applied; once the policy only
// audits, the revision applies.
func TestEnforcedUnsupportedFeatureStallsTheRevision(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	good := src.commit(map[string]string{"policies/unsupported-a.yaml": policy("unsupported-a", "team")}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	readyAt(t, repo, good)

	stopped := src.commit(map[string]string{
		"policies/unsupported-a.yaml": policy("unsupported-a", "changed"),
		"policies/verify.yaml":        assertPolicy("unsupported-verify", "Enforce"),
	}, nil)
	got := stalledAt(t, repo, stopped)
	ready := condition(got, gitopsv1alpha1.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(gitopsv1alpha1.ReasonValidationFailed))
	g.Expect(ready.Message).To(ContainSubstring(
		`policies/verify.yaml: ClusterPolicy "unsupported-verify": spec.rules[0].validate.assert: validate.assert is not supported by charter anywhere yet`))
	g.Expect(got.Status.LastAppliedRevision).To(Equal(good))
	g.Expect(getPolicy(t, "unsupported-a").Spec.Rules[0].Name).To(Equal("require-team"))
	g.Expect(getPolicy(t, "unsupported-verify")).To(BeNil())

	audit := src.commit(map[string]string{"policies/verify.yaml": assertPolicy("unsupported-verify", "Audit")}, nil)
	eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.LastAppliedRevision).To(Equal(audit), "Ready: %+v", condition(r, gitopsv1alpha1.ConditionReady))
	})
	g.Expect(getPolicy(t, "unsupported-a").Spec.Rules[0].Name).To(Equal("require-changed"))
	g.Expect(getPolicy(t, "unsupported-verify")).NotTo(BeNil())
}
