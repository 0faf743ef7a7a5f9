package gitsync

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/reconciler/gitsync/internal/gitserver"
)

func TestSmartHTTPWithBasicAuth(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	rev := src.commit(map[string]string{"auth.yaml": policy("auth-a", "team")}, nil)
	const password = "s3cret-Passw0rd-for-test"
	server := httpGitServer(t, filepath.Dir(src.dir), "charter", password)
	url := server.URL + "/" + filepath.Base(src.dir)

	g.Expect(testClient.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-auth"},
		Data:       map[string][]byte{"username": []byte("charter"), "password": []byte(password), "ca.crt": server.CA},
	})).To(Succeed())
	repo := newPolicyRepository(t, ns, url, func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.SecretRef = &corev1.LocalObjectReference{Name: "git-auth"}
	})
	readyAt(t, repo, rev)
	g.Expect(getPolicy(t, "auth-a")).NotTo(BeNil())

	// The remote is asked for the ref every second; while it stays put,
	// nothing is fetched.
	packs, lists := server.uploadPacks.Load(), server.refLists.Load()
	g.Eventually(server.refLists.Load).WithTimeout(waitTimeout).Should(BeNumerically(">=", lists+3))
	g.Expect(server.uploadPacks.Load()).To(Equal(packs))

	// A new commit over HTTP updates too, fetching once.
	rev2 := src.commit(map[string]string{"auth.yaml": policy("auth-a", "over-http")}, nil)
	readyAt(t, repo, rev2)
	g.Expect(getPolicy(t, "auth-a").Spec.Rules[0].Name).To(Equal("require-over-http"))
	g.Expect(server.uploadPacks.Load()).To(Equal(packs + 1))
}

func TestSmartHTTPWithBearerToken(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	rev := src.commit(map[string]string{"bearer.yaml": policy("bearer-a", "team")}, nil)
	const token = "t0ken-for-bearer-test"
	server := httpGitServer(t, filepath.Dir(src.dir), "unused", token)
	g.Expect(testClient.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-token"},
		Data:       map[string][]byte{"bearerToken": []byte(token), "ca.crt": server.CA},
	})).To(Succeed())
	repo := newPolicyRepository(t, ns, server.URL+"/"+filepath.Base(src.dir), func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.SecretRef = &corev1.LocalObjectReference{Name: "git-token"}
	})
	readyAt(t, repo, rev)
	g.Expect(getPolicy(t, "bearer-a")).NotTo(BeNil())
}

func TestWrongCredentialsGiveAClearMessageWithoutTheSecret(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	src.commit(map[string]string{"auth.yaml": policy("wrongauth-a", "team")}, nil)
	server := httpGitServer(t, filepath.Dir(src.dir), "charter", "the-right-one")
	url := server.URL + "/" + filepath.Base(src.dir)

	const wrong = "Wr0ng-Passw0rd-Never-Shown"
	g.Expect(testClient.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-auth"},
		Data:       map[string][]byte{"username": []byte("charter"), "password": []byte(wrong), "ca.crt": server.CA},
	})).To(Succeed())
	// The URL carries credentials too; they must not show either.
	withUserInfo := "https://charter:" + wrong + "@" + url[len("https://"):]
	repo := newPolicyRepository(t, ns, withUserInfo, func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.SecretRef = &corev1.LocalObjectReference{Name: "git-auth"}
	})
	got := eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(condition(r, gitopsv1alpha1.ConditionReady).Reason).To(Equal(gitopsv1alpha1.ReasonFetchFailed))
	})
	msg := condition(got, gitopsv1alpha1.ConditionReady).Message
	g.Expect(msg).To(ContainSubstring("authentication"))
	g.Expect(msg).To(ContainSubstring(url))
	g.Expect(msg).NotTo(ContainSubstring(wrong))
	g.Expect(condition(got, gitopsv1alpha1.ConditionReconciling).Message).NotTo(ContainSubstring(wrong))
	g.Expect(getPolicy(t, "wrongauth-a")).To(BeNil())
}

// TestSSHWithKnownHosts syncs over SSH; a host key that known_hosts does
// not hold stops the fetch with a message that names it, and nothing of
// the identity.
func TestSSHWithKnownHosts(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	rev := src.commit(map[string]string{"ssh.yaml": policy("ssh-a", "team")}, nil)
	srv := gitserver.StartSSH(t, filepath.Dir(src.dir))
	impostor := gitserver.StartSSH(t, t.TempDir())

	g.Expect(testClient.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-ssh"},
		Data:       map[string][]byte{"identity": srv.Identity, "known_hosts": srv.KnownHosts("ecdsa-sha2-nistp256")},
	})).To(Succeed())
	repo := newPolicyRepository(t, ns, srv.URL(filepath.Base(src.dir)), func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.SecretRef = &corev1.LocalObjectReference{Name: "git-ssh"}
	})
	readyAt(t, repo, rev)
	g.Expect(getPolicy(t, "ssh-a")).NotTo(BeNil())

	// The server now answers with keys known_hosts does not hold.
	g.Expect(testClient.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "git-ssh-wrong"},
		Data: map[string][]byte{"identity": srv.Identity, "known_hosts": []byte(knownhosts.Line(
			[]string{srv.Addr}, impostor.HostKeys["ecdsa-sha2-nistp256"]))},
	})).To(Succeed())
	r := eventually(t, repo, func(Gomega, *gitopsv1alpha1.PolicyRepository) {})
	r.Spec.SecretRef.Name = "git-ssh-wrong"
	g.Expect(testClient.Update(t.Context(), r)).To(Succeed())
	got := eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(condition(r, gitopsv1alpha1.ConditionReady).Reason).To(Equal(gitopsv1alpha1.ReasonFetchFailed))
	})
	msg := condition(got, gitopsv1alpha1.ConditionReady).Message
	g.Expect(msg).To(ContainSubstring("key mismatch"))
	g.Expect(msg).NotTo(ContainSubstring("PRIVATE KEY"))
	g.Expect(got.Status.LastAppliedRevision).To(Equal(rev))
	g.Expect(getPolicy(t, "ssh-a")).NotTo(BeNil())
}
