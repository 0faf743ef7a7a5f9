package gitsync

import (
	"testing"

	. "github.com/onsi/gomega"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/reconciler/gitsync/apply"
)

func TestFirstCommitAppliedThenNewCommitUpdates(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	rev1 := src.commit(map[string]string{
		"policies/apply-a.yaml": policy("apply-a", "team"),
		"policies/apply-b.yaml": policy("apply-b", "owner"),
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) { r.Spec.Path = "policies" })

	got := readyAt(t, repo, rev1)
	g.Expect(got.Status.LastAttemptedRevision).To(Equal(rev1))
	g.Expect(got.Status.Inventory.Entries).To(ConsistOf(
		gitopsv1alpha1.ResourceRef{ID: "_apply-a_kyverno.io_ClusterPolicy", Version: "v1"},
		gitopsv1alpha1.ResourceRef{ID: "_apply-b_kyverno.io_ClusterPolicy", Version: "v1"},
	))
	p := getPolicy(t, "apply-a")
	g.Expect(p).NotTo(BeNil())
	g.Expect(p.Labels).To(HaveKeyWithValue(apply.OwnerNameLabel, "policies"))
	g.Expect(p.Labels).To(HaveKeyWithValue(apply.OwnerNamespaceLabel, ns))
	g.Expect(p.ManagedFields).To(ContainElement(HaveField("Manager", "charter/"+ns+"/policies")))
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Message).To(ContainSubstring(rev1))

	rev2 := src.commit(map[string]string{"policies/apply-a.yaml": policy("apply-a", "cost-center")}, nil)
	readyAt(t, repo, rev2)
	p = getPolicy(t, "apply-a")
	g.Expect(p.Spec.Rules[0].Name).To(Equal("require-cost-center"))
}

// TestDriftIsCorrected: an unchanged revision is applied again every
// interval, so a policy deleted or edited by hand comes back.
func TestDriftIsCorrected(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	rev := src.commit(map[string]string{"drift.yaml": policy("drift-a", "team")}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	readyAt(t, repo, rev)

	p := getPolicy(t, "drift-a")
	p.Spec.Rules[0].Name = "edited-by-hand"
	g.Expect(testClient.Update(t.Context(), p)).To(Succeed())
	g.Eventually(func() string { return getPolicy(t, "drift-a").Spec.Rules[0].Name }).
		WithTimeout(waitTimeout).Should(Equal("require-team"))

	g.Expect(testClient.Delete(t.Context(), getPolicy(t, "drift-a"))).To(Succeed())
	g.Eventually(func() *kyvernov1.ClusterPolicy { return getPolicy(t, "drift-a") }).
		WithTimeout(waitTimeout).ShouldNot(BeNil())
}
