package gitsync

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// kindPolicy validates objects of kind.
func kindPolicy(name, kind string) string {
	return `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: ` + name + `
spec:
  background: false
  rules:
  - name: named
    match:
      any:
      - resources:
          kinds: [` + kind + `]
    validate:
      pattern: {metadata: {name: "?*"}}
`
}

// TestUnservedKindStallsTheRevision: the pre-apply check asks the API
// server's discovery, as policy admission and Kyverno's policy validation
// do, so a revision whose policy names a kind the cluster does not serve
// is Stalled naming the file and the field, and nothing of it applies;
// once the policy names a served kind, the revision applies.
func TestUnservedKindStallsTheRevision(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	good := src.commit(map[string]string{"policies/kinds-a.yaml": policy("kinds-a", "team")}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	readyAt(t, repo, good)

	stopped := src.commit(map[string]string{
		"policies/kinds-a.yaml":      policy("kinds-a", "changed"),
		"policies/kinds-widget.yaml": kindPolicy("kinds-widget", "Widget"),
	}, nil)
	got := stalledAt(t, repo, stopped)
	ready := condition(got, gitopsv1alpha1.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(gitopsv1alpha1.ReasonValidationFailed))
	g.Expect(ready.Message).To(ContainSubstring(
		`policies/kinds-widget.yaml: ClusterPolicy "kinds-widget": spec.rules[0].match.any[0].resources.kinds[0]: unable to convert GVK to GVR for kinds Widget`))
	g.Expect(got.Status.LastAppliedRevision).To(Equal(good))
	g.Expect(getPolicy(t, "kinds-a").Spec.Rules[0].Name).To(Equal("require-team"))
	g.Expect(getPolicy(t, "kinds-widget")).To(BeNil())

	fixed := src.commit(map[string]string{"policies/kinds-widget.yaml": kindPolicy("kinds-widget", "ConfigMap")}, nil)
	eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.LastAppliedRevision).To(Equal(fixed), "Ready: %+v", condition(r, gitopsv1alpha1.ConditionReady))
	})
	g.Expect(getPolicy(t, "kinds-a").Spec.Rules[0].Name).To(Equal("require-changed"))
	g.Expect(getPolicy(t, "kinds-widget")).NotTo(BeNil())
}
