package gitsync

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/reconciler/gitsync/apply"
)

func TestRemovedFileIsPruned(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	src.commit(map[string]string{
		"prune-keep.yaml": policy("prune-keep", "team"),
		"prune-gone.yaml": policy("prune-gone", "team"),
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.Inventory).NotTo(BeNil())
		g.Expect(r.Status.Inventory.Entries).To(HaveLen(2))
	})

	rev := src.commit(map[string]string{"prune-gone.yaml": ""}, nil)
	got := readyAt(t, repo, rev)
	g.Expect(got.Status.Inventory.Entries).To(ConsistOf(gitopsv1alpha1.ResourceRef{ID: "_prune-keep_kyverno.io_ClusterPolicy", Version: "v1"}))
	g.Eventually(func() bool { return getPolicy(t, "prune-gone") == nil }).Should(BeTrue())
	g.Expect(getPolicy(t, "prune-keep")).NotTo(BeNil())
}

func TestPruneDisabledAnnotationKeepsTheObject(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	src.commit(map[string]string{
		"a.yaml": policy("prune-optout-a", "team"),
		"b.yaml": policy("prune-optout-b", "team"),
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL())
	eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(getPolicy(t, "prune-optout-b")).NotTo(BeNil())
	})
	// Someone opts the object out of pruning in the cluster.
	p := getPolicy(t, "prune-optout-b")
	p.Annotations = map[string]string{apply.PruneAnnotation: apply.PruneDisabled}
	g.Expect(testClient.Update(context.Background(), p)).To(Succeed())

	rev := src.commit(map[string]string{"b.yaml": ""}, nil)
	readyAt(t, repo, rev)
	g.Consistently(func() bool { return getPolicy(t, "prune-optout-b") != nil }).WithTimeout(2 * time.Second).Should(BeTrue())
}

func TestPruneFalseLeavesRemovedObjects(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	src.commit(map[string]string{
		"a.yaml": policy("noprune-a", "team"),
		"b.yaml": policy("noprune-b", "team"),
	}, nil)
	prune := false
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) { r.Spec.Prune = &prune })
	eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(getPolicy(t, "noprune-b")).NotTo(BeNil())
	})
	rev := src.commit(map[string]string{"b.yaml": ""}, nil)
	got := readyAt(t, repo, rev)
	g.Expect(got.Status.Inventory.Entries).To(HaveLen(1))
	g.Expect(getPolicy(t, "noprune-b")).NotTo(BeNil())
}

func TestEmptyRenderNeverPrunesEverything(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	first := src.commit(map[string]string{
		"policies/a.yaml": policy("empty-a", "team"),
		"README.md":       "docs",
	}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) { r.Spec.Path = "policies" })
	readyAt(t, repo, first)

	// The folder is emptied (here: its last file moved away).
	empty := src.commit(map[string]string{"policies/a.yaml": "", "policies/notes.txt": "nothing to apply"}, nil)
	got := eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.LastAttemptedRevision).To(Equal(empty))
		g.Expect(condition(r, gitopsv1alpha1.ConditionStalled).Status).To(BeEquivalentTo("True"))
	})
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Message).To(ContainSubstring("refusing to prune all 1 objects"))
	g.Expect(got.Status.LastAppliedRevision).To(Equal(first))
	g.Expect(getPolicy(t, "empty-a")).NotTo(BeNil())
}
