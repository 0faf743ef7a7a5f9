package e2e

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

// Names of the OCI repository security specs.
const (
	secOCICharterNamespace = "e2e-sec-oci-charter"
	secOCINamespace        = "e2e-sec-oci-team"
	// secOCINeighbour is another tenant's namespace, whose pull Secret
	// reads the private registry.
	secOCINeighbour = "e2e-sec-oci-neighbour"
	secOCIAttacker  = "e2e-sec-oci-attacker"
)

// secOCIServer is an HTTP server on loopback that counts what it is asked.
type secOCIServer struct {
	*httptest.Server
	requests atomic.Int32
	// authorized counts requests that carried an Authorization header.
	authorized atomic.Int32
}

func newSecOCIServer(handle http.HandlerFunc) *secOCIServer {
	s := &secOCIServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if r.Header.Get("Authorization") != "" {
			s.authorized.Add(1)
		}
		handle(w, r)
	}))
	DeferCleanup(s.Close)
	return s
}

// host is the server's host:port.
func (s *secOCIServer) host() string { return strings.TrimPrefix(s.URL, "http://") }

// The attacker holds admin in one namespace and may keep
// PolicyRepositories there. charter's gitsync may reach the registries the
// platform let through (--egress-allow names three loopback registries);
// a service on loopback next to them (the stand-in for what only charter's
// network position reaches: a metadata endpoint, the node's own ports) is
// not let through. Each spec is an attempt to make charter call that
// service, or the metadata address, through an oci:// repository, or to
// pull with another namespace's registry credentials.
var _ = Describe("Security: OCI repositories", Label("security"), Ordered, func() {
	var (
		attacker client.Client
		// inside is the service the attacker wants charter to call.
		inside *secOCIServer
		// realm answers every request 401, sending the token request
		// to inside; redirect sends every manifest request there.
		realm, redirect *secOCIServer
		// private is the neighbour's registry: it wants the
		// neighbour's credentials.
		private *secOCIServer
	)

	BeforeAll(func(ctx SpecContext) {
		// The registries listen on loopback, where charter runs.
		skipUnlessClusterReachesCharter()
		cl := suite.client
		for _, ns := range []string{secOCICharterNamespace, secOCINamespace, secOCINeighbour} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		DeferCleanup(func(ctx SpecContext) {
			for _, ns := range []string{secOCINamespace, secOCINeighbour} {
				Expect(client.IgnoreNotFound(cl.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
			}
		}, NodeTimeout(30*time.Second))
		attacker = namespaceAdmin(ctx, secOCIAttacker, secOCINamespace, policyWriter(gitopsv1alpha1.GroupVersion.Group, "policyrepositories"))

		inside = newSecOCIServer(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"token": "instance-credentials"}`))
		})
		realm = newSecOCIServer(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+inside.URL+`/token",service="registry"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		})
		redirect = newSecOCIServer(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v2/" {
				w.WriteHeader(http.StatusOK)
				return
			}
			http.Redirect(w, r, inside.URL+r.URL.Path, http.StatusTemporaryRedirect)
		})
		private = newSecOCIServer(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		})

		By("the neighbour's pull Secret for the private registry, and the attacker's ServiceAccount naming it")
		auth := base64.StdEncoding.EncodeToString([]byte("neighbour:hunter2"))
		config, err := json.Marshal(map[string]any{"auths": map[string]any{private.host(): map[string]string{"auth": auth}}})
		Expect(err).NotTo(HaveOccurred())
		Expect(cl.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secOCINeighbour, Name: "regcred"},
			Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: config}})).To(Succeed())
		Expect(attacker.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: secOCINamespace, Name: "puller"},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}})).To(Succeed())

		startCharterWith(ctx, secOCICharterNamespace, "gitsync",
			"--gitsync-cache-dir="+GinkgoT().TempDir(),
			"--egress-allow="+strings.Join([]string{realm.host(), redirect.host(), private.host()}, ","))
	}, NodeTimeout(2*time.Minute))

	// newRepository creates, as the attacker, an oci:// PolicyRepository
	// of its namespace.
	newRepository := func(ctx SpecContext, name, url string, mutate ...func(*gitopsv1alpha1.PolicyRepository)) *gitopsv1alpha1.PolicyRepository {
		GinkgoHelper()
		pr := &gitopsv1alpha1.PolicyRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: secOCINamespace, Name: name},
			Spec: gitopsv1alpha1.PolicyRepositorySpec{
				URL: url,
				// Plain HTTP: charter allows it for loopback registries.
				Insecure: true,
				Interval: &metav1.Duration{Duration: time.Minute},
			},
		}
		for _, m := range mutate {
			m(pr)
		}
		Expect(attacker.Create(ctx, pr)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, pr))).To(Succeed()) })
		return pr
	}
	// fetchFailed waits for the repository's Ready condition to say its
	// fetch failed, and returns the message.
	fetchFailed := func(ctx SpecContext, pr *gitopsv1alpha1.PolicyRepository) string {
		GinkgoHelper()
		got := waitPolicyRepository(ctx, pr, func(g Gomega, r *gitopsv1alpha1.PolicyRepository) {
			ready := prepoCondition(r, gitopsv1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(gitopsv1alpha1.ReasonOCIFetchFailed), ready.Message)
		})
		return prepoCondition(got, gitopsv1alpha1.ConditionReady).Message
	}

	It("cannot make charter use the metadata endpoint or a loopback service as its registry", func(ctx SpecContext) {
		for name, target := range map[string]struct {
			url      string
			insecure bool
		}{
			// HTTPS: charter allows plain HTTP for loopback registries
			// only.
			"metadata": {"oci://169.254.169.254/latest/meta-data", false},
			"loopback": {"oci://" + inside.host() + "/team/policies", true},
			// Another spelling of loopback.
			"mapped": {"oci://[::ffff:127.0.0.1]:" + inside.URL[strings.LastIndex(inside.URL, ":")+1:] + "/team/policies", false},
		} {
			msg := fetchFailed(ctx, newRepository(ctx, name, target.url, func(pr *gitopsv1alpha1.PolicyRepository) { pr.Spec.Insecure = target.insecure }))
			Expect(msg).To(ContainSubstring("blocked"), name)
			Expect(msg).NotTo(ContainSubstring("instance-credentials"), name)
		}
		Expect(inside.requests.Load()).To(BeZero(), "charter called the loopback service")
	}, SpecTimeout(2*time.Minute))

	It("cannot send charter's token request, or follow a redirect, from an allowed registry to a loopback service", func(ctx SpecContext) {
		for name, attack := range map[string]struct {
			reg *secOCIServer
			// refusal: the realm is refused by go-containerregistry
			// itself (a private or link-local realm host), before the
			// egress guard would see the dial.
			refusal string
		}{"realm": {realm, "realm"}, "redirect": {redirect, "blocked"}} {
			reg := attack.reg
			msg := fetchFailed(ctx, newRepository(ctx, name, "oci://"+reg.host()+"/team/policies"))
			Expect(msg).To(ContainSubstring(attack.refusal), name)
			Expect(msg).NotTo(ContainSubstring("instance-credentials"), name)
			Expect(reg.requests.Load()).NotTo(BeZero(), "charter never asked the allowed registry %s", name)
		}
		Expect(inside.requests.Load()).To(BeZero(), "charter called the loopback service")
	}, SpecTimeout(2*time.Minute))

	It("cannot pull with another namespace's pull Secret", func(ctx SpecContext) {
		By("naming it in spec.secretRef")
		msg := fetchFailed(ctx, newRepository(ctx, "secretref", "oci://"+private.host()+"/neighbour/policies", func(pr *gitopsv1alpha1.PolicyRepository) {
			pr.Spec.SecretRef = &corev1.LocalObjectReference{Name: "regcred"}
		}))
		Expect(msg).To(ContainSubstring("secret " + secOCINamespace + "/regcred"))
		By("naming it in the imagePullSecrets of its ServiceAccount")
		msg = fetchFailed(ctx, newRepository(ctx, "serviceaccount", "oci://"+private.host()+"/neighbour/policies", func(pr *gitopsv1alpha1.PolicyRepository) {
			pr.Spec.ServiceAccountName = "puller"
		}))
		Expect(msg).To(ContainSubstring("secret " + secOCINamespace + "/regcred"))
		By("a path in the Secret's name")
		err := attacker.Create(ctx, &gitopsv1alpha1.PolicyRepository{
			ObjectMeta: metav1.ObjectMeta{Namespace: secOCINamespace, Name: "traversal"},
			Spec: gitopsv1alpha1.PolicyRepositorySpec{URL: "oci://" + private.host() + "/neighbour/policies", Insecure: true,
				SecretRef: &corev1.LocalObjectReference{Name: "../" + secOCINeighbour + "/regcred"}},
		})
		if err == nil {
			pr := &gitopsv1alpha1.PolicyRepository{ObjectMeta: metav1.ObjectMeta{Namespace: secOCINamespace, Name: "traversal"}}
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, pr))).To(Succeed()) })
			fetchFailed(ctx, pr)
		}
		Expect(private.authorized.Load()).To(BeZero(), "the private registry got credentials")
	}, SpecTimeout(2*time.Minute))
})
