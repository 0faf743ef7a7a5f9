package gitsync

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

func TestBrokenCommitChangesNothingAndSaysWhereThenTheFixRecovers(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	good := src.commit(map[string]string{
		"policies/invalid-a.yaml": policy("invalid-a", "team"),
		"policies/invalid-b.yaml": policy("invalid-b", "team"),
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	readyAt(t, repo, good)

	// One broken policy next to a valid change: neither applies.
	broken := src.commit(map[string]string{
		"policies/invalid-a.yaml": policy("invalid-a", "changed"),
		"policies/invalid-b.yaml": brokenPolicy("invalid-b"),
		"policies/invalid-c.yaml": policy("invalid-c", "team"),
	}, nil)
	got := stalledAt(t, repo, broken)
	ready := condition(got, gitopsv1alpha1.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(gitopsv1alpha1.ReasonValidationFailed))
	g.Expect(ready.Message).To(ContainSubstring(`policies/invalid-b.yaml: ClusterPolicy "invalid-b": spec.rules: a policy needs at least one rule`))
	g.Expect(got.Status.LastAppliedRevision).To(Equal(good))
	g.Expect(got.Status.Inventory.Entries).To(HaveLen(2))
	g.Expect(getPolicy(t, "invalid-a").Spec.Rules[0].Name).To(Equal("require-team"))
	g.Expect(getPolicy(t, "invalid-b").Spec.Rules).To(HaveLen(1))
	g.Expect(getPolicy(t, "invalid-c")).To(BeNil())

	fixed := src.commit(map[string]string{"policies/invalid-b.yaml": policy("invalid-b", "fixed")}, nil)
	got = readyAt(t, repo, fixed)
	g.Expect(condition(got, gitopsv1alpha1.ConditionStalled).Status).To(BeEquivalentTo("Absent"))
	g.Expect(getPolicy(t, "invalid-a").Spec.Rules[0].Name).To(Equal("require-changed"))
	g.Expect(getPolicy(t, "invalid-b").Spec.Rules[0].Name).To(Equal("require-fixed"))
	g.Expect(getPolicy(t, "invalid-c")).NotTo(BeNil())
}

func TestFetchFailureKeepsWhatIsApplied(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	good := src.commit(map[string]string{"fetchfail.yaml": policy("fetchfail-a", "team")}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	readyAt(t, repo, good)

	// The branch disappears from the remote.
	r := eventually(t, repo, func(Gomega, *gitopsv1alpha1.PolicyRepository) {})
	r.Spec.Ref.Branch = "no-such-branch"
	g.Expect(testClient.Update(t.Context(), r)).To(Succeed())
	got := eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(condition(r, gitopsv1alpha1.ConditionReady).Reason).To(Equal(gitopsv1alpha1.ReasonFetchFailed))
	})
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Message).To(ContainSubstring(`branch "no-such-branch" not found`))
	g.Expect(condition(got, gitopsv1alpha1.ConditionReconciling).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(got.Status.LastAppliedRevision).To(Equal(good))
	g.Expect(getPolicy(t, "fetchfail-a")).NotTo(BeNil())
}
