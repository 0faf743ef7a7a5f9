package gitsync

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

func TestSuspendHolds(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	first := src.commit(map[string]string{"suspend.yaml": policy("suspend-a", "team")}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	readyAt(t, repo, first)

	r := eventually(t, repo, func(Gomega, *gitopsv1alpha1.PolicyRepository) {})
	r.Spec.Suspend = true
	g.Expect(testClient.Update(t.Context(), r)).To(Succeed())
	// The reconciler has seen the suspension once it observed the
	// generation that asks for it; only then may the next commit land.
	suspended := r.Generation
	eventually(t, repo, func(g Gomega, got *gitopsv1alpha1.PolicyRepository) {
		g.Expect(got.Status.ObservedGeneration).To(Equal(suspended))
	})

	second := src.commit(map[string]string{"suspend.yaml": policy("suspend-a", "held")}, nil)
	g.Consistently(func(g Gomega) {
		got := eventually(t, repo, func(Gomega, *gitopsv1alpha1.PolicyRepository) {})
		g.Expect(got.Status.LastAttemptedRevision).To(Equal(first))
		g.Expect(getPolicy(t, "suspend-a").Spec.Rules[0].Name).To(Equal("require-team"))
	}).WithTimeout(3 * time.Second).Should(Succeed())

	r = eventually(t, repo, func(Gomega, *gitopsv1alpha1.PolicyRepository) {})
	r.Spec.Suspend = false
	g.Expect(testClient.Update(t.Context(), r)).To(Succeed())
	readyAt(t, repo, second)
	g.Expect(getPolicy(t, "suspend-a").Spec.Rules[0].Name).To(Equal("require-held"))
}
