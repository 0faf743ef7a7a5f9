package gitsync

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/imagetest"
	"github.com/charter-dev/charter/reconciler/gitsync/source/oci"
)

// ociRepo is a repository of Flux artifacts on a loopback registry that a
// test pushes to.
type ociRepo struct {
	t      *testing.T
	reg    *imagetest.Registry
	path   string
	remote *oci.Remote
}

func newOCIRepo(t *testing.T, reg *imagetest.Registry, path string, opts ...oci.Option) *ociRepo {
	t.Helper()
	r, err := oci.NewRemote("oci://"+reg.Host+"/"+path, append([]oci.Option{oci.WithInsecure(true)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return &ociRepo{t: t, reg: reg, path: path, remote: r}
}

func (o *ociRepo) url() string { return "oci://" + o.reg.Host + "/" + o.path }

// push pushes files as a Flux artifact under tag and returns the revision
// the reconciler reports, "<tag>@sha256:…", and the image for signing.
func (o *ociRepo) push(tag string, files map[string]string) (string, imagetest.Image) {
	o.t.Helper()
	dir := o.t.TempDir()
	for p, body := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			o.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			o.t.Fatal(err)
		}
	}
	data, err := oci.Archive(dir)
	if err != nil {
		o.t.Fatal(err)
	}
	img, err := oci.Image(data, nil)
	if err != nil {
		o.t.Fatal(err)
	}
	d, err := o.remote.Push(context.Background(), tag, img)
	if err != nil {
		o.t.Fatal(err)
	}
	ref := o.reg.Host + "/" + o.path
	return tag + "@" + d.String(), imagetest.Image{Ref: ref + ":" + tag, Digest: d.String(), DigestRef: ref + "@" + d.String()}
}

func newOCIPolicyRepository(t *testing.T, ns string, o *ociRepo, mutate ...func(*gitopsv1alpha1.PolicyRepository)) *gitopsv1alpha1.PolicyRepository {
	t.Helper()
	return newPolicyRepository(t, ns, o.url(), append([]func(*gitopsv1alpha1.PolicyRepository){func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.Ref = &gitopsv1alpha1.GitRef{Tag: "latest"}
		r.Spec.Insecure = true
	}}, mutate...)...)
}

// TestOCIRepositoryAppliesAndPrunes: an artifact applies as a Git
// revision does, reported as <tag>@sha256:<digest>; a newer artifact
// under the tag replaces it and prunes what left it; spec.path picks the
// folder inside the tarball.
func TestOCIRepositoryAppliesAndPrunes(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	o := newOCIRepo(t, imagetest.NewRegistry(t), "team/policies")
	rev1, _ := o.push("latest", map[string]string{
		"prod/a.yaml":  policy("oci-a", "team"),
		"prod/b.yaml":  policy("oci-b", "owner"),
		"other/c.yaml": policy("oci-c", "ignored"),
	})
	repo := newOCIPolicyRepository(t, ns, o, func(r *gitopsv1alpha1.PolicyRepository) { r.Spec.Path = "prod" })
	got := readyAt(t, repo, rev1)
	g.Expect(rev1).To(MatchRegexp(`^latest@sha256:[0-9a-f]{64}$`))
	g.Expect(got.Status.Inventory.Entries).To(HaveLen(2))
	g.Expect(getPolicy(t, "oci-a")).NotTo(BeNil())
	g.Expect(getPolicy(t, "oci-c")).To(BeNil())

	rev2, _ := o.push("latest", map[string]string{"prod/a.yaml": policy("oci-a", "changed")})
	readyAt(t, repo, rev2)
	g.Expect(getPolicy(t, "oci-a").Spec.Rules[0].Name).To(Equal("require-changed"))
	g.Expect(getPolicy(t, "oci-b")).To(BeNil())

	// A digest pins the first artifact back.
	digest := strings.TrimPrefix(rev1, "latest@")
	g.Expect(testClient.Get(t.Context(), client.ObjectKeyFromObject(repo), got)).To(Succeed())
	got.Spec.Ref = &gitopsv1alpha1.GitRef{Digest: digest}
	g.Expect(testClient.Update(t.Context(), got)).To(Succeed())
	readyAt(t, repo, digest)
	g.Expect(getPolicy(t, "oci-b")).NotTo(BeNil())
}

// TestOCIRepositoryRefusesWhatItCannotRead: an image that is not a Flux
// artifact stalls with ArtifactInvalid; a registry the egress guard
// refuses and insecure on a remote registry say so; nothing applies.
func TestOCIRepositoryRefusesWhatItCannotRead(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := imagetest.NewRegistry(t)
	img := reg.Push(t, "team/container", "latest")
	repo := newPolicyRepository(t, ns, "oci://"+reg.Host+"/team/container", func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.Ref, r.Spec.Insecure = nil, true
	})
	got := stalledWith(t, repo, "latest@"+img.Digest, gitopsv1alpha1.ReasonArtifactInvalid)
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Message).To(ContainSubstring("not Flux's"))

	// The cloud metadata address: the guard refuses the dial.
	meta := newPolicyRepository(t, ns, "oci://169.254.169.254/team/policies", func(r *gitopsv1alpha1.PolicyRepository) {
		r.Name, r.Spec.Ref = "metadata", nil
	})
	eventually(t, meta, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		ready := condition(r, gitopsv1alpha1.ConditionReady)
		g.Expect(ready.Reason).To(Equal(gitopsv1alpha1.ReasonOCIFetchFailed))
		g.Expect(ready.Message).To(ContainSubstring("blocked"))
	})

	remote := newPolicyRepository(t, ns, "oci://registry.example.com/team/policies", func(r *gitopsv1alpha1.PolicyRepository) {
		r.Name, r.Spec.Ref, r.Spec.Insecure = "remote-insecure", nil, true
	})
	got = eventually(t, remote, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(condition(r, gitopsv1alpha1.ConditionStalled).Status).To(Equal(metav1.ConditionTrue))
	})
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Message).To(ContainSubstring("plain HTTP is allowed only for a loopback registry"))
}

// TestOCIRepositoryAPIValidation: the API server refuses refs and
// settings that do not fit the URL's kind, naming the field.
func TestOCIRepositoryAPIValidation(t *testing.T) {
	ns := newNamespace(t)
	for name, spec := range map[string]gitopsv1alpha1.PolicyRepositorySpec{
		"spec.ref: an oci:// repository takes tag, semver or digest": {URL: "oci://ghcr.io/a/b", Ref: &gitopsv1alpha1.GitRef{Branch: "main"}},
		"spec.ref.digest is for oci:// repositories":                 {URL: "https://example.com/a.git", Ref: &gitopsv1alpha1.GitRef{Digest: "sha256:" + strings.Repeat("a", 64)}},
		"spec.insecure is for oci:// repositories only":              {URL: "https://example.com/a.git", Insecure: true},
		"spec.verify needs secretRef (keys) or matchOIDCIdentity":    {URL: "oci://ghcr.io/a/b", Verify: &gitopsv1alpha1.GitVerification{Provider: gitopsv1alpha1.ProviderCosign}},
	} {
		err := testClient.Create(t.Context(), &gitopsv1alpha1.PolicyRepository{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "invalid-"}, Spec: spec})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

// TestOCIRepositoryVerifiesCosignSignatures: a signed artifact applies
// and SourceVerified names the key; the tag re-pushed unsigned, or signed
// by another key, stalls with VerificationFailed and the last good
// artifact stays applied; the verified digest is the applied one.
func TestOCIRepositoryVerifiesCosignSignatures(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg := imagetest.NewRegistry(t)
	key, stranger := imagetest.NewKey(t), imagetest.NewKey(t)
	g.Expect(testClient.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cosign-keys"},
		Data:       map[string][]byte{"cosign.pub": []byte(key.PublicPEM)},
	})).To(Succeed())
	o := newOCIRepo(t, reg, "team/signed")
	signed, img := o.push("latest", map[string]string{"a.yaml": policy("oci-signed", "team")})
	reg.Sign(t, img, key.Signer, imagetest.SignOptions{})
	repo := newOCIPolicyRepository(t, ns, o, func(r *gitopsv1alpha1.PolicyRepository) {
		pollRarelyRetryOften(r)
		r.Spec.Verify = &gitopsv1alpha1.GitVerification{Provider: gitopsv1alpha1.ProviderCosign, SecretRef: corev1.LocalObjectReference{Name: "cosign-keys"}}
	})
	got := readyAt(t, repo, signed)
	verified := condition(got, gitopsv1alpha1.ConditionSourceVerified)
	g.Expect(verified.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(verified.Message).To(ContainSubstring("verified cosign signature of " + signed + " by key cosign.pub of secret cosign-keys"))

	// Tampering with the tag: an unsigned artifact under it.
	unsigned, _ := o.push("latest", map[string]string{"a.yaml": policy("oci-signed", "tampered")})
	request(t, repo)
	got = stalledWith(t, repo, unsigned, gitopsv1alpha1.ReasonVerificationFailed)
	g.Expect(condition(got, gitopsv1alpha1.ConditionSourceVerified).Message).To(ContainSubstring("no accepted cosign signature"))
	g.Expect(got.Status.LastAppliedRevision).To(Equal(signed))
	g.Expect(getPolicy(t, "oci-signed").Spec.Rules[0].Name).To(Equal("require-team"))

	// Signed, but by a key the Secret does not hold.
	foreign, fimg := o.push("latest", map[string]string{"a.yaml": policy("oci-signed", "foreign")})
	reg.Sign(t, fimg, stranger.Signer, imagetest.SignOptions{})
	request(t, repo)
	stalledWith(t, repo, foreign, gitopsv1alpha1.ReasonVerificationFailed)
	g.Expect(getPolicy(t, "oci-signed").Spec.Rules[0].Name).To(Equal("require-team"))

	// A signature copied from the signed artifact onto this one is about
	// another digest: refused.
	copied, cimg := o.push("latest", map[string]string{"a.yaml": policy("oci-signed", "copied")})
	reg.CopySignatures(t, img, cimg)
	request(t, repo)
	stalledWith(t, repo, copied, gitopsv1alpha1.ReasonVerificationFailed)
	g.Expect(getPolicy(t, "oci-signed").Spec.Rules[0].Name).To(Equal("require-team"))

	resigned, rimg := o.push("latest", map[string]string{"a.yaml": policy("oci-signed", "signed-again")})
	reg.Sign(t, rimg, key.Signer, imagetest.SignOptions{})
	request(t, repo)
	readyAt(t, repo, resigned)
	g.Expect(getPolicy(t, "oci-signed").Spec.Rules[0].Name).To(Equal("require-signed-again"))
}

// TestOCIRepositoryVerifiesKeylessSignatures: an artifact signed keyless
// (a Fulcio-style certificate embedding an SCT, logged in Rekor with a
// bundle) applies when its identity matches spec.verify.matchOIDCIdentity,
// verified offline against the Sigstore trust charter is given
// (--sigstore-tuf-mirror: here a TUF repository on loopback); another
// identity, or a certificate no CT log has seen, stalls with
// VerificationFailed and the last good artifact stays applied.
func TestOCIRepositoryVerifiesKeylessSignatures(t *testing.T) {
	g := NewWithT(t)
	ca, log := imagetest.NewCA(t, "keyless fulcio"), imagetest.NewRekor(t)
	tuf := imagetest.NewTUFRepository(t, ca, log)
	suiteTrust.use(t, imageverify.NewTUFTrust(imageverify.TUFOptions{Mirror: tuf.URL, Root: tuf.Root, Egress: imagetest.LoopbackEgress()}))
	reg := imagetest.NewRegistry(t)
	o := newOCIRepo(t, reg, "team/keyless")
	sign := func(img imagetest.Image, id imagetest.Identity) {
		leaf, cert := ca.Leaf(t, id)
		reg.Sign(t, img, leaf, imagetest.SignOptions{Cert: cert, Chain: []byte(ca.RootPEM), Rekor: log})
	}
	const issuer = "https://token.actions.githubusercontent.com"
	release := imagetest.Identity{Email: "release@example.com", Issuer: issuer, SCT: log}

	ns := newNamespace(t)
	signed, img := o.push("latest", map[string]string{"a.yaml": policy("oci-keyless", "team")})
	sign(img, release)
	repo := newOCIPolicyRepository(t, ns, o, func(r *gitopsv1alpha1.PolicyRepository) {
		pollRarelyRetryOften(r)
		r.Spec.Verify = &gitopsv1alpha1.GitVerification{Provider: gitopsv1alpha1.ProviderCosign,
			MatchOIDCIdentity: []gitopsv1alpha1.OIDCIdentityMatch{{Issuer: `^https://token\.actions\.githubusercontent\.com$`, Subject: `^release@example\.com$`}}}
	})
	got := readyAt(t, repo, signed)
	g.Expect(condition(got, gitopsv1alpha1.ConditionSourceVerified).Message).To(ContainSubstring("verified cosign signature of " + signed + " by keyless identity"))
	g.Expect(tuf.Requests()).To(BeNumerically(">", 0), "the configured TUF repository was not asked")

	intruder, iimg := o.push("latest", map[string]string{"a.yaml": policy("oci-keyless", "intruder")})
	sign(iimg, imagetest.Identity{Email: "intruder@example.com", Issuer: issuer, SCT: log})
	request(t, repo)
	stalledWith(t, repo, intruder, gitopsv1alpha1.ReasonVerificationFailed)
	g.Expect(getPolicy(t, "oci-keyless").Spec.Rules[0].Name).To(Equal("require-team"))

	unlogged, uimg := o.push("latest", map[string]string{"a.yaml": policy("oci-keyless", "unlogged")})
	sign(uimg, imagetest.Identity{Email: "release@example.com", Issuer: issuer})
	request(t, repo)
	got = stalledWith(t, repo, unlogged, gitopsv1alpha1.ReasonVerificationFailed)
	g.Expect(condition(got, gitopsv1alpha1.ConditionSourceVerified).Message).To(ContainSubstring("SCT"))
	g.Expect(getPolicy(t, "oci-keyless").Spec.Rules[0].Name).To(Equal("require-team"))
}

// request asks for a sync at once, as the receiver does.
func request(t *testing.T, repo *gitopsv1alpha1.PolicyRepository) {
	t.Helper()
	var r gitopsv1alpha1.PolicyRepository
	if err := testClient.Get(t.Context(), client.ObjectKeyFromObject(repo), &r); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(r.DeepCopy())
	if r.Annotations == nil {
		r.Annotations = map[string]string{}
	}
	r.Annotations[gitopsv1alpha1.ReconcileRequestAnnotation] = fmt.Sprint(metav1.Now().UnixNano())
	if err := testClient.Patch(t.Context(), &r, patch); err != nil {
		t.Fatal(err)
	}
}

// authRegistry is a loopback registry that answers only requests with
// basic auth user:password.
func authRegistry(t *testing.T, user, password string) *imagetest.Registry {
	t.Helper()
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return &imagetest.Registry{Server: srv, Host: u.Host}
}

func dockerConfig(host, user, password string) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	data, _ := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{"auth": auth}}})
	return data
}

// TestOCIRepositoryCredentialsOfItsNamespace: a private registry is read
// with spec.secretRef's docker config, or else with the imagePullSecrets of
// the ServiceAccount the repository runs as; without either the registry
// refuses and the status says how to fix it. A tenant's repository
// applies with its ServiceAccount's rights.
func TestOCIRepositoryCredentialsOfItsNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := authRegistry(t, "deploy", "s3cret")
	o := newOCIRepo(t, reg, "team/private", oci.WithKeychain(authn.NewMultiKeychain(staticKeychain{authn.FromConfig(authn.AuthConfig{Username: "deploy", Password: "s3cret"})})))
	ns := newTenantNamespace(t)
	rev, _ := o.push("latest", map[string]string{"p.yaml": namespacedPolicy(ns, "oci-private")})

	// The deployer may write Policies in its namespace only.
	grantPolicyWriter(t, ns, "get", "list", "watch", "create", "update", "patch", "delete")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer"}}
	g.Expect(testClient.Create(ctx, sa)).To(Succeed())

	repo := newOCIPolicyRepository(t, ns, o, func(r *gitopsv1alpha1.PolicyRepository) {
		pollRarelyRetryOften(r)
		r.Spec.ServiceAccountName = "deployer"
	})
	got := eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(condition(r, gitopsv1alpha1.ConditionReady).Reason).To(Equal(gitopsv1alpha1.ReasonOCIFetchFailed))
	})
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Message).To(ContainSubstring("set spec.secretRef, or imagePullSecrets on the ServiceAccount"))

	// The ServiceAccount's imagePullSecrets are the fix.
	g.Expect(testClient.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pull"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig(reg.Host, "deploy", "s3cret")},
	})).To(Succeed())
	sa.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
	g.Expect(testClient.Update(ctx, sa)).To(Succeed())
	readyAt(t, repo, rev)
	g.Expect(getNamespaced(t, &kyvernov1.Policy{}, ns, "oci-private")).NotTo(BeNil())

	// A ClusterPolicy is beyond the ServiceAccount's rights: refused by
	// the API server as the deployer, nothing applied.
	rev2, _ := o.push("latest", map[string]string{"p.yaml": namespacedPolicy(ns, "oci-private"), "c.yaml": policy("oci-tenant-cluster", "team")})
	request(t, repo)
	got = stalledWith(t, repo, rev2, gitopsv1alpha1.ReasonForbidden)
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Message).To(ContainSubstring(fmt.Sprintf(`User "system:serviceaccount:%s:deployer" cannot patch resource "clusterpolicies"`, ns)))
	g.Expect(getPolicy(t, "oci-tenant-cluster")).To(BeNil())

	// spec.secretRef, a docker config with wrong credentials, wins over
	// the ServiceAccount's.
	g.Expect(testClient.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wrong"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig(reg.Host, "deploy", "wrong")},
	})).To(Succeed())
	g.Expect(testClient.Get(ctx, client.ObjectKeyFromObject(repo), got)).To(Succeed())
	got.Spec.SecretRef = &corev1.LocalObjectReference{Name: "wrong"}
	g.Expect(testClient.Update(ctx, got)).To(Succeed())
	got = eventually(t, repo, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
		g.Expect(r.Status.ObservedGeneration).To(Equal(r.Generation))
		g.Expect(condition(r, gitopsv1alpha1.ConditionReady).Reason).To(Equal(gitopsv1alpha1.ReasonOCIFetchFailed))
	})
	g.Expect(condition(got, gitopsv1alpha1.ConditionReady).Message).NotTo(ContainSubstring("wrong"))
}

// staticKeychain answers every registry with one authenticator.
type staticKeychain struct{ auth authn.Authenticator }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.auth, nil }

// TestReceiverRegistryWebhooks: Harbor's Auth Header, Docker Hub's token
// in the URL and GHCR's signed package event each sync an oci://
// repository at once; a push of another repository, or a wrong token,
// syncs nothing.
func TestReceiverRegistryWebhooks(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	token := "registry-hook-token"
	g.Expect(testClient.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"},
		Data:       map[string][]byte{ReceiverTokenKey: []byte(token)},
	})).To(Succeed())
	o := newOCIRepo(t, imagetest.NewRegistry(t), "team/policies")
	first, _ := o.push("latest", map[string]string{"a.yaml": policy("oci-hook", "first")})
	repo := newOCIPolicyRepository(t, ns, o, func(r *gitopsv1alpha1.PolicyRepository) {
		r.Spec.Interval = &metav1.Duration{Duration: time.Hour}
		r.Spec.Receiver = &gitopsv1alpha1.Receiver{SecretRef: corev1.LocalObjectReference{Name: "hook"}}
	})
	readyAt(t, repo, first)

	srv := httptest.NewServer(NewReceiver(testClient))
	defer srv.Close()
	hook := srv.URL + HookPathPrefix + ns + "/policies"
	post := func(url string, header map[string]string, body string) int {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	harbor := func(repo string) string {
		return `{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"tag":"latest"}],"repository":{"repo_full_name":"` + repo + `"}}}`
	}
	ghcr := `{"action":"published","package":{"name":"policies","package_type":"container"}}`

	g.Expect(post(hook, map[string]string{"Authorization": "wrong"}, harbor("team/policies"))).To(Equal(http.StatusUnauthorized))
	g.Expect(post(hook+"?token=wrong", nil, `{"repository":{"repo_name":"team/policies"}}`)).To(Equal(http.StatusUnauthorized))
	g.Expect(post(hook, map[string]string{"Authorization": token}, harbor("team/other"))).To(Equal(http.StatusOK))

	for i, c := range []struct {
		name   string
		url    string
		header map[string]string
		body   string
	}{
		{"Harbor", hook, map[string]string{"Authorization": "Bearer " + token}, harbor("team/policies")},
		{"Docker Hub", hook + "?token=" + token, nil, `{"push_data":{"tag":"latest"},"repository":{"repo_name":"team/policies"}}`},
		{"GHCR", hook, map[string]string{"X-Hub-Signature-256": sign([]byte(token), []byte(ghcr)), "X-GitHub-Event": "package"}, ghcr},
	} {
		next, _ := o.push("latest", map[string]string{"a.yaml": policy("oci-hook", fmt.Sprintf("push-%d", i))})
		g.Expect(post(c.url, c.header, c.body)).To(Equal(http.StatusAccepted), c.name)
		readyAt(t, repo, next)
	}
	// The ignored push above requested nothing: the last request is the
	// GHCR one's, and a push of another repository leaves it.
	before := eventually(t, repo, func(Gomega, *gitopsv1alpha1.PolicyRepository) {}).Annotations[gitopsv1alpha1.ReconcileRequestAnnotation]
	g.Expect(post(hook, map[string]string{"Authorization": token}, harbor("team/other"))).To(Equal(http.StatusOK))
	g.Expect(eventually(t, repo, func(Gomega, *gitopsv1alpha1.PolicyRepository) {}).Annotations[gitopsv1alpha1.ReconcileRequestAnnotation]).To(Equal(before))
}
