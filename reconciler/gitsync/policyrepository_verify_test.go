package gitsync

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

func TestSignedCommitAcceptedUnsignedRefused(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key, armored := newSigningKey(t)
	g.Expect(testClient.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "signers"},
		Data:       map[string][]byte{"team.asc": armored},
	})).To(Succeed())

	src := newGitRepo(t)
	signed := src.commit(map[string]string{"verify.yaml": policy("verify-a", "team")}, key)
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.Verify = &gitopsv1alpha1.GitVerification{Mode: gitopsv1alpha1.VerifyHead, SecretRef: corev1.LocalObjectReference{Name: "signers"}}
	})
	got := readyAt(t, repo, signed)
	verified := condition(got, gitopsv1alpha1.ConditionSourceVerified)
	g.Expect(verified.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(verified.Message).To(ContainSubstring(key.PrimaryKey.KeyIdString()))

	unsigned := src.commit(map[string]string{"verify.yaml": policy("verify-a", "unsigned")}, nil)
	got = eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.LastAttemptedRevision).To(Equal(unsigned))
		g.Expect(condition(r, gitopsv1alpha1.ConditionSourceVerified).Status).To(Equal(metav1.ConditionFalse))
	})
	g.Expect(condition(got, gitopsv1alpha1.ConditionSourceVerified).Message).To(ContainSubstring("not signed"))
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Reason).To(Equal(gitopsv1alpha1.ReasonVerificationFailed))
	g.Expect(condition(got, gitopsv1alpha1.ConditionStalled).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(got.Status.LastAppliedRevision).To(Equal(signed))
	g.Expect(getPolicy(t, "verify-a").Spec.Rules[0].Name).To(Equal("require-team"))

	// Signed by a key the secret does not hold.
	stranger, _ := newSigningKey(t)
	foreign := src.commit(map[string]string{"verify.yaml": policy("verify-a", "foreign")}, stranger)
	got = eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.LastAttemptedRevision).To(Equal(foreign))
		g.Expect(condition(r, gitopsv1alpha1.ConditionSourceVerified).Message).To(ContainSubstring("no key in the verification secret signed it"))
	})
	g.Expect(getPolicy(t, "verify-a").Spec.Rules[0].Name).To(Equal("require-team"))

	resigned := src.commit(map[string]string{"verify.yaml": policy("verify-a", "signed-again")}, key)
	readyAt(t, repo, resigned)
	g.Expect(getPolicy(t, "verify-a").Spec.Rules[0].Name).To(Equal("require-signed-again"))
}

// TestAddingTheSignersKeyRecoversWithoutACommit: a commit refused because
// the Secret lacks its signer's key applies once the key is added; the
// signature is rechecked at the retry interval.
func TestAddingTheSignersKeyRecoversWithoutACommit(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	key, armored := newSigningKey(t)
	_, otherArmored := newSigningKey(t)
	signers := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "signers"},
		Data:       map[string][]byte{"other.asc": otherArmored},
	}
	g.Expect(testClient.Create(t.Context(), signers)).To(Succeed())

	src := newGitRepo(t)
	signed := src.commit(map[string]string{"verify.yaml": policy("verify-rotate", "team")}, key)
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) {
		pollRarelyRetryOften(r)
		r.Spec.Verify = &gitopsv1alpha1.GitVerification{Mode: gitopsv1alpha1.VerifyHead, SecretRef: corev1.LocalObjectReference{Name: "signers"}}
	})
	eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.LastAttemptedRevision).To(Equal(signed))
		g.Expect(condition(r, gitopsv1alpha1.ConditionSourceVerified).Status).To(Equal(metav1.ConditionFalse))
	})
	g.Expect(getPolicy(t, "verify-rotate")).To(BeNil())

	signers.Data["team.asc"] = armored
	g.Expect(testClient.Update(t.Context(), signers)).To(Succeed())
	got := readyAt(t, repo, signed)
	g.Expect(condition(got, gitopsv1alpha1.ConditionSourceVerified).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(getPolicy(t, "verify-rotate")).NotTo(BeNil())
}
