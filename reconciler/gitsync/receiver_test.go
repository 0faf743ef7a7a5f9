package gitsync

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

func sign(token, body []byte) string {
	mac := hmac.New(sha256.New, token)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func TestReceiverPushSyncsBeforeTheNextPoll(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	token := []byte("receiver-token")
	g.Expect(testClient.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"},
		Data:       map[string][]byte{ReceiverTokenKey: token},
	})).To(Succeed())
	src := newGitRepo(t)
	first := src.commit(map[string]string{"hook.yaml": policy("hook-a", "team")}, nil)
	// An hour between polls: only the push can bring the next commit.
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.Interval = &metav1.Duration{Duration: time.Hour}
		r.Spec.Receiver = &gitopsv1alpha1.Receiver{SecretRef: corev1.LocalObjectReference{Name: "hook"}}
	})
	readyAt(t, repo, first)

	srv := httptest.NewServer(NewReceiver(testClient))
	defer srv.Close()
	hook := srv.URL + HookPathPrefix + ns + "/policies"
	body := []byte(`{"ref":"refs/heads/main"}`)

	tests := []struct {
		name   string
		header map[string]string
		path   string
		want   int
	}{
		{name: "no signature", want: http.StatusUnauthorized},
		{name: "bad GitHub signature", header: map[string]string{"X-Hub-Signature-256": sign([]byte("other"), body)}, want: http.StatusUnauthorized},
		{name: "bad GitLab token", header: map[string]string{"X-Gitlab-Token": "other"}, want: http.StatusUnauthorized},
		{name: "unknown repository", path: srv.URL + HookPathPrefix + ns + "/nope", header: map[string]string{"X-Signature": sign(token, body)}, want: http.StatusNotFound},
		{name: "GitHub ping", header: map[string]string{"X-Hub-Signature-256": sign(token, body), "X-GitHub-Event": "ping"}, want: http.StatusOK},
		{name: "GitLab token", header: map[string]string{"X-Gitlab-Token": string(token)}, want: http.StatusAccepted},
		{name: "generic HMAC", header: map[string]string{"X-Signature": sign(token, body)}, want: http.StatusAccepted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := hook
			if tt.path != "" {
				url = tt.path
			}
			req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			NewWithT(t).Expect(err).NotTo(HaveOccurred())
			resp.Body.Close()
			NewWithT(t).Expect(resp.StatusCode).To(Equal(tt.want))
		})
	}

	second := src.commit(map[string]string{"hook.yaml": policy("hook-a", "pushed")}, nil)
	req, _ := http.NewRequest(http.MethodPost, hook, bytes.NewReader(body))
	req.Header.Set("X-Hub-Signature-256", sign(token, body))
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
	// With an hour between polls, only the push brings the commit; how
	// fast is bench-gitops' figure, not an assertion here.
	readyAt(t, repo, second)
	// An earlier accepted push may have synced the commit first; this
	// push's request is handled in its turn.
	eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.LastHandledReconcileAt).To(Equal(r.Annotations[RequestedAtAnnotation]))
	})
	g.Expect(getPolicy(t, "hook-a").Spec.Rules[0].Name).To(Equal("require-pushed"))
}

// TestReceiverLegacySecretAnnotation: a repository that still names its
// receiver Secret by annotation keeps accepting pushes.
func TestReceiverLegacySecretAnnotation(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	token := []byte("legacy-token")
	g.Expect(testClient.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy-hook"},
		Data:       map[string][]byte{ReceiverTokenKey: token},
	})).To(Succeed())
	src := newGitRepo(t)
	first := src.commit(map[string]string{"legacy.yaml": policy("hook-legacy", "team")}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.Interval = &metav1.Duration{Duration: time.Hour}
		r.Annotations = map[string]string{ReceiverSecretAnnotation: "legacy-hook"}
	})
	readyAt(t, repo, first)

	srv := httptest.NewServer(NewReceiver(testClient))
	defer srv.Close()
	second := src.commit(map[string]string{"legacy.yaml": policy("hook-legacy", "pushed")}, nil)
	body := []byte(`{}`)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+HookPathPrefix+ns+"/policies", bytes.NewReader(body))
	req.Header.Set("X-Signature", sign(token, body))
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
	readyAt(t, repo, second)
}

// TestReceiverSecretMissing: a receiver whose Secret is absent refuses
// with 503, so the sender retries, and requests no sync.
func TestReceiverSecretMissing(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	first := src.commit(map[string]string{"missing.yaml": policy("hook-missing", "team")}, nil)
	repo := newPolicyRepository(t, ns, src.fileURL(), func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.Receiver = &gitopsv1alpha1.Receiver{SecretRef: corev1.LocalObjectReference{Name: "absent"}}
	})
	readyAt(t, repo, first)
	srv := httptest.NewServer(NewReceiver(testClient))
	defer srv.Close()
	body := []byte(`{}`)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+HookPathPrefix+ns+"/policies", bytes.NewReader(body))
	req.Header.Set("X-Signature", sign([]byte("guess"), body))
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable))
	got := eventually(t, repo, func(Gomega, *gitopsv1alpha1.PolicyRepository) {})
	g.Expect(got.Annotations).NotTo(HaveKey(RequestedAtAnnotation))
}

func TestReceiverWithoutSecretAcceptsNothing(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	src := newGitRepo(t)
	src.commit(map[string]string{"x.yaml": policy("hook-none", "team")}, nil)
	newPolicyRepository(t, ns, src.fileURL())
	srv := httptest.NewServer(NewReceiver(testClient))
	defer srv.Close()
	body := []byte(`{}`)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+HookPathPrefix+ns+"/policies", bytes.NewReader(body))
	req.Header.Set("X-Gitlab-Token", "")
	req.Header.Set("X-Signature", sign(nil, body))
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound))
}
