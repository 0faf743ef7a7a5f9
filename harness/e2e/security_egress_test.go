package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/internal/imagetest"
)

// Namespaces and names of the egress specs: charter's own namespace of
// each charter the specs run, and the attacker's, where the attacker is
// a namespace admin and nothing more.
const (
	egressCharterNamespace     = "e2e-sec-egress-charter"
	egressOpenCharterNamespace = "e2e-sec-egress-open-charter"
	egressListCharterNamespace = "e2e-sec-egress-allowlist-charter"
	egressTeam                 = "e2e-sec-egress-team"
	egressAttacker             = "e2e-sec-egress-attacker"
	egressLookupPolicy         = "e2e-sec-egress-lookup"
	egressSecret               = "s3cr3t-node-token"
)

// egressServers are what the attacker aims at, on this machine's
// loopback where charter serve runs: token serves a secret, as a node
// agent or a metadata service would; front is a service charter is
// allowed to call (--egress-allow), which answers at /public and
// redirects /redirect to token.
type egressServers struct {
	token, front *httptest.Server
}

func startEgressServers() egressServers {
	GinkgoHelper()
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"token": egressSecret})
	}))
	DeferCleanup(token.Close)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, token.URL+"/token", http.StatusFound)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"token": "public-answer"})
	}))
	DeferCleanup(front.Close)
	return egressServers{token: token, front: front}
}

func (s egressServers) port(srv *httptest.Server) string {
	u, err := url.Parse(srv.URL)
	Expect(err).NotTo(HaveOccurred())
	return u.Port()
}

// egressLookup is the platform team's ClusterPolicy that asks a service
// about a ConfigMap at the endpoint its data names, and tells its answer
// in the message: the tenant, who writes the ConfigMap, picks the URL.
const egressLookup = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: e2e-sec-egress-lookup}
spec:
  validationFailureAction: Enforce
  background: false
  rules:
  - name: lookup
    match:
      any:
      - resources:
          kinds: [ConfigMap]
          namespaces: [e2e-sec-egress-team]
          selector: {matchLabels: {e2e-sec-egress: probe}}
    context:
    - name: answer
      apiCall:
        service: {url: "{{ request.object.data.endpoint }}"}
    validate:
      message: "the service answered {{ answer.token }}"
      deny: {}
`

// egressTenantPolicy is the attacker's Policy: it fetches the token
// server and prints the answer in its denial.
const egressTenantPolicy = `
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: steal-token, namespace: e2e-sec-egress-team}
spec:
  validationFailureAction: Enforce
  rules:
  - name: leak
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    context:
    - name: tok
      apiCall:
        service: {url: "http://127.0.0.1:PORT/token"}
    validate:
      message: "{{ tok.token }}"
      deny: {}
`

// egressTenantCELPolicy is the attacker's NamespacedValidatingPolicy:
// it reads URL with the CEL http library and prints the answer.
const egressTenantCELPolicy = `
apiVersion: policies.kyverno.io/v1
kind: NamespacedValidatingPolicy
metadata: {name: NAME, namespace: e2e-sec-egress-team}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  matchConditions:
  - name: probe
    expression: "has(object.metadata.labels) && 'e2e-sec-egress-cel' in object.metadata.labels && object.metadata.labels['e2e-sec-egress-cel'] == 'NAME'"
  variables:
  - name: answer
    expression: "http.Get('URL')"
  validations:
  - expression: "false"
    messageExpression: "'the service answered ' + string(variables.answer.body.token)"
`

// egressAttackerRules are the policy kinds the attacker may write in its
// namespace, the same in every spec tree (its Role is created once).
func egressAttackerRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		policyWriter(kyvernov1.GroupVersion.Group, "policies", "cleanuppolicies"),
		policyWriter(policiesv1.GroupVersion.Group, "namespacedvalidatingpolicies", "namespacedimagevalidatingpolicies"),
	}
}

// egressNotaryPolicy is the attacker's NamespacedImageValidatingPolicy:
// a Notary attestor trusting its own CA (CERTS, a JSON string) for every
// image of its namespace's Pods, so that charter fetches the signatures
// of whatever registry a Pod's image names.
const egressNotaryPolicy = `
apiVersion: policies.kyverno.io/v1
kind: NamespacedImageValidatingPolicy
metadata: {name: notary-probe, namespace: e2e-sec-egress-team}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  matchImageReferences: [{glob: "*"}]
  attestors:
  - name: notary
    notary: {certs: {value: CERTS}}
  validations:
  - expression: "images.containers.all(i, verifyImageSignatures(i, [attestors.notary]) > 0)"
    message: image is not signed by the tenant's CA
`

// egressRekorPolicy is the attacker's NamespacedImageValidatingPolicy
// whose cosign attestor trusts its key (KEY, a JSON string) and names the
// Rekor log at REKOR, with that log's key, so that charter asks REKOR for
// the log entries of a signature.
const egressRekorPolicy = `
apiVersion: policies.kyverno.io/v1
kind: NamespacedImageValidatingPolicy
metadata: {name: rekor-probe, namespace: e2e-sec-egress-team}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  matchImageReferences: [{glob: "*"}]
  attestors:
  - name: cosign
    cosign:
      key: {data: KEY}
      ctlog: {url: "REKOR", rekorPubKey: KEY}
  validations:
  - expression: "images.containers.all(i, verifyImageSignatures(i, [attestors.cosign]) > 0)"
    message: image is not signed by the tenant's key
`

// countingService is a loopback service that answers 404 to everything
// and counts the requests that reach it.
func countingService() (*httptest.Server, *atomic.Int32) {
	GinkgoHelper()
	var requests atomic.Int32
	service := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusNotFound)
	}))
	DeferCleanup(service.Close)
	return service, &requests
}

// egressProbe is a ConfigMap of the attacker's namespace that the
// platform's lookup policy evaluates, asking endpoint.
func egressProbe(name, endpoint string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: egressTeam, Labels: map[string]string{"e2e-sec-egress": "probe"}},
		Data:       map[string]string{"endpoint": endpoint},
	}
}

// denial dry-runs the creation of obj as cl and returns the refusal's
// text, "" when it was admitted.
func denial(ctx context.Context, cl client.Client, obj client.Object) string {
	if err := cl.Create(ctx, obj, client.DryRunAll); err != nil {
		return err.Error()
	}
	return ""
}

var _ = Describe("Security: egress", Label("security"), func() {
	Context("under charter's defaults", Ordered, func() {
		var (
			attacker client.Client
			servers  egressServers
			// registry is where the tenant pushes its signed images.
			registry *imagetest.Registry
		)
		BeforeAll(func(ctx SpecContext) {
			skipUnlessClusterReachesCharter()
			createNamespaces(ctx, egressCharterNamespace, egressTeam)
			attacker = namespaceAdmin(ctx, egressAttacker, egressTeam, egressAttackerRules()...)
			servers = startEgressServers()
			registry = imagetest.NewRegistry(GinkgoT())
			// Only the front service and the registry are let through, by
			// address and port.
			startCharterWith(ctx, egressCharterNamespace, "admission",
				"--egress-allow=127.0.0.1:"+servers.port(servers.front)+","+registry.Host)
			waitPolicyWebhook(ctx)
			installPolicy(ctx, &kyvernov1.ClusterPolicy{}, egressLookup)
			waitPolicyReady(ctx, egressLookupPolicy)
			// The lookup is served once an allowed answer comes back in a
			// denial: the platform's policy does call out.
			Eventually(func() string {
				return denial(ctx, attacker, egressProbe("probe-public", servers.front.URL+"/public"))
			}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(ContainSubstring("the service answered public-answer"))
		}, NodeTimeout(3*time.Minute))

		It("refuses a tenant Policy whose apiCall calls a loopback service, naming the field", func(ctx SpecContext) {
			var p kyvernov1.Policy
			Expect(yaml.UnmarshalStrict([]byte(strings.ReplaceAll(egressTenantPolicy, "PORT", servers.port(servers.token))), &p)).To(Succeed())
			err := attacker.Create(ctx, &p)
			if err == nil {
				DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, &p))).To(Succeed()) })
			}
			Expect(err).To(MatchError(ContainSubstring(
				`Policy "e2e-sec-egress-team/steal-token": spec.rules[0].context[0].apiCall.service.url: a namespaced policy may not call out (charter serve --allow-http-in-namespaced-policies)`)))
			Expect(apierrors.IsNotFound(suite.client.Get(ctx, client.ObjectKeyFromObject(&p), &kyvernov1.Policy{}))).To(BeTrue(), "the Policy was stored")
		}, SpecTimeout(time.Minute))

		It("keeps a platform policy's service call off loopback and the metadata endpoint, and never shows the answer", func(ctx SpecContext) {
			for endpoint, blocked := range map[string]string{
				servers.token.URL + "/token":                               "address 127.0.0.1 is blocked",
				"http://169.254.169.254/latest/meta-data/":                 "address 169.254.169.254 is blocked",
				"http://[fd00:ec2::254]/latest/meta-data/":                 "address fd00:ec2::254 is blocked",
				"http://169.254.170.2/v2/credentials":                      "address 169.254.170.2 is blocked",
				"http://100.100.100.200/latest/meta-data/":                 "address 100.100.100.200 is blocked",
				"http://0.0.0.0:" + servers.port(servers.token) + "/token": "address 0.0.0.0 is blocked",
			} {
				msg := denial(ctx, attacker, egressProbe("probe-blocked", endpoint))
				Expect(msg).To(ContainSubstring(egressLookupPolicy), "endpoint %s", endpoint)
				Expect(msg).To(ContainSubstring(blocked), "endpoint %s", endpoint)
				Expect(msg).NotTo(ContainSubstring(egressSecret), "endpoint %s", endpoint)
			}
		}, SpecTimeout(2*time.Minute))

		// notaryProbe creates, as the attacker, its Notary policy of that
		// name trusting ca, and returns a loopback service that counts the
		// requests that reach it. Each spec names its own policy: a
		// policy of the last spec's name may still be there (createEventually
		// takes AlreadyExists for done), and would judge with its CA.
		notaryProbe := func(ctx SpecContext, name string, ca *imagetest.CA) (*httptest.Server, *atomic.Int32) {
			GinkgoHelper()
			service, requests := countingService()
			certs, err := json.Marshal(ca.RootPEM)
			Expect(err).NotTo(HaveOccurred())
			var p policiesv1.NamespacedImageValidatingPolicy
			Expect(yaml.UnmarshalStrict([]byte(strings.ReplaceAll(egressNotaryPolicy, "CERTS", string(certs))), &p)).To(Succeed())
			p.Name = name
			createEventually(ctx, attacker, &p)
			return service, requests
		}
		notaryPod := func(image string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notary-probe", Namespace: egressTeam},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}
		}
		// unsignedBy is the denial of an image the policy name finds unsigned.
		unsignedBy := func(name string) string { return "Policy " + name + " failed: image is not signed by the tenant's CA" }

		It("keeps a namespaced image policy's Notary verification off loopback services in any spelling", func(ctx SpecContext) {
			service, requests := notaryProbe(ctx, "notary-probe", imagetest.NewCA(GinkgoT(), "tenant CA"))
			unsigned := unsignedBy("notary-probe")

			// The Notary signatures of an image are read from the registry
			// its reference names: the attacker's Pods name the service in
			// every spelling that reaches it. A failed verification only
			// counts as unsigned (no reason reaches the denial, as in
			// Kyverno), so what shows the guard is that the service is
			// never called.
			digest := "@sha256:" + strings.Repeat("ab", 32)
			port := servers.port(service)
			for _, image := range []string{
				"127.0.0.1:" + port + "/app" + digest,
				"localhost:" + port + "/app" + digest,
				"0.0.0.0:" + port + "/app" + digest,
			} {
				// Served once the policy's webhook rules are registered.
				Eventually(func() string { return denial(ctx, attacker, notaryPod(image)) }).
					WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(ContainSubstring(unsigned), "image %s", image)
			}
			Expect(requests.Load()).To(BeZero(), "charter called the loopback service as a registry")
		}, SpecTimeout(3*time.Minute))

		It("keeps a namespaced image policy's Notary revocation checks off the loopback URLs its certificate names", func(ctx SpecContext) {
			ca := imagetest.NewCA(GinkgoT(), "tenant CA")
			service, requests := notaryProbe(ctx, "notary-revocation", ca)
			unsigned := unsignedBy("notary-revocation")
			By("an unsigned image: denied once the policy is served")
			bare := registry.Push(GinkgoT(), "tenant/app", "unsigned")
			Eventually(func() string { return denial(ctx, attacker, notaryPod(bare.DigestRef)) }).
				WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(ContainSubstring(unsigned))

			By("an image the tenant signed with a certificate naming no revocation URL: admitted")
			plain := registry.Push(GinkgoT(), "tenant/app", "plain")
			registry.NotarySign(GinkgoT(), plain.DigestRef, ca.NotarySigner(GinkgoT(), "tenant"))
			Expect(denial(ctx, attacker, notaryPod(plain.DigestRef))).To(BeEmpty())

			By("one signed with a certificate naming the loopback service as its OCSP responder and CRL: charter never calls it")
			revocable := registry.Push(GinkgoT(), "tenant/app", "revocable")
			registry.NotarySign(GinkgoT(), revocable.DigestRef, ca.NotarySignerWithRevocation(GinkgoT(), "tenant", service.URL+"/ocsp", service.URL+"/crl"))
			Expect(denial(ctx, attacker, notaryPod(revocable.DigestRef))).To(ContainSubstring(unsigned))
			Expect(requests.Load()).To(BeZero(), "charter fetched the revocation URLs on loopback")
		}, SpecTimeout(3*time.Minute))

		It("keeps a namespaced image policy's Rekor lookups off the loopback URL its attestor names", func(ctx SpecContext) {
			service, requests := countingService()
			key := imagetest.NewKey(GinkgoT())
			pem, err := json.Marshal(key.PublicPEM)
			Expect(err).NotTo(HaveOccurred())
			var p policiesv1.NamespacedImageValidatingPolicy
			Expect(yaml.UnmarshalStrict([]byte(strings.NewReplacer("KEY", string(pem), "REKOR", service.URL).Replace(egressRekorPolicy)), &p)).To(Succeed())
			createEventually(ctx, attacker, &p)
			const unsignedByKey = "Policy rekor-probe failed: image is not signed by the tenant's key"

			By("an unsigned image: denied once the policy is served")
			bare := registry.Push(GinkgoT(), "tenant/logged", "unsigned")
			Eventually(func() string { return denial(ctx, attacker, notaryPod(bare.DigestRef)) }).
				WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(ContainSubstring(unsignedByKey))

			By("an image the tenant signed, without a Rekor bundle: its log entry would be looked up at the policy's Rekor URL, which charter never calls")
			signed := registry.Push(GinkgoT(), "tenant/logged", "signed")
			registry.Sign(GinkgoT(), signed, key.Signer, imagetest.SignOptions{})
			msg := denial(ctx, attacker, notaryPod(signed.DigestRef))
			Expect(msg).To(ContainSubstring("Policy rekor-probe failed"))
			Expect(msg).To(ContainSubstring(service.URL + "/api/v1/log/entries/retrieve\": address 127.0.0.1 is blocked"))
			Expect(requests.Load()).To(BeZero(), "charter called the Rekor URL on loopback")
		}, SpecTimeout(3*time.Minute))

		It("refuses a name that resolves to loopback when it is dialled", func(ctx SpecContext) {
			msg := denial(ctx, attacker, egressProbe("probe-localhost", "http://localhost:"+servers.port(servers.token)+"/token"))
			Expect(msg).To(ContainSubstring(egressLookupPolicy))
			Expect(msg).To(Or(ContainSubstring("address 127.0.0.1 is blocked"), ContainSubstring("address ::1 is blocked")))
			Expect(msg).NotTo(ContainSubstring(egressSecret))
		}, SpecTimeout(time.Minute))

		It("refuses a redirect from an allowed service to a blocked address", func(ctx SpecContext) {
			msg := denial(ctx, attacker, egressProbe("probe-redirect", servers.front.URL+"/redirect"))
			Expect(msg).To(ContainSubstring(egressLookupPolicy))
			Expect(msg).To(ContainSubstring("address 127.0.0.1 is blocked"))
			Expect(msg).NotTo(ContainSubstring(egressSecret))
		}, SpecTimeout(time.Minute))
	})

	// The platform lets its policies call loopback services
	// (--egress-allow=127.0.0.0/8), as it would its internal network, and
	// relies on --cel-http-allowlist to hold them to its API under /api
	// and its status page on port 80. The attacker picks the URL of the
	// platform's lookup policy and tries URLs that a string prefix of an
	// allowed one would admit.
	Context("with --cel-http-allowlist", Ordered, func() {
		var (
			attacker client.Client
			api      *httptest.Server
			// other listens on 127.0.0.12, a host whose URL starts with
			// the allowed http://127.0.0.1.
			other *httptest.Server
		)
		BeforeAll(func(ctx SpecContext) {
			skipUnlessClusterReachesCharter()
			createNamespaces(ctx, egressListCharterNamespace, egressTeam)
			attacker = namespaceAdmin(ctx, egressAttacker, egressTeam, egressAttackerRules()...)
			// api answers its API, under /api/ once dot segments are
			// resolved as a server does, and the secret anywhere else.
			api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				token := egressSecret
				if strings.HasPrefix(path.Clean(r.URL.Path), "/api/") {
					token = "public-answer"
				}
				_ = json.NewEncoder(w).Encode(map[string]string{"token": token})
			}))
			DeferCleanup(api.Close)
			other = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_ = json.NewEncoder(w).Encode(map[string]string{"token": egressSecret})
			}))
			l, err := net.Listen("tcp", "127.0.0.12:0")
			Expect(err).NotTo(HaveOccurred())
			other.Listener = l
			other.Start()
			DeferCleanup(other.Close)
			startCharterWith(ctx, egressListCharterNamespace, "admission",
				"--egress-allow=127.0.0.0/8", "--cel-http-allowlist="+api.URL+"/api,http://127.0.0.1")
			waitPolicyWebhook(ctx)
			installPolicy(ctx, &kyvernov1.ClusterPolicy{}, egressLookup)
			waitPolicyReady(ctx, egressLookupPolicy)
			Eventually(func() string {
				return denial(ctx, attacker, egressProbe("probe-allowed", api.URL+"/api/public"))
			}).WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(ContainSubstring("the service answered public-answer"), "an allowed URL is called")
		}, NodeTimeout(3*time.Minute))

		It("refuses a URL that merely starts with an allowed one", func(ctx SpecContext) {
			otherPort := strings.TrimPrefix(other.URL, "http://127.0.0.12:")
			for _, endpoint := range []string{
				api.URL + "/api.evil/token",
				api.URL + "/api/../secret",
				"http://127.0.0.12:" + otherPort + "/token",
				"http://127.0.0.1:80@127.0.0.12:" + otherPort + "/token",
			} {
				msg := denial(ctx, attacker, egressProbe("probe-prefix", endpoint))
				Expect(msg).To(ContainSubstring(egressLookupPolicy), "endpoint %s", endpoint)
				Expect(msg).To(ContainSubstring("is blocked (not in the allowed URL prefixes"), "endpoint %s", endpoint)
				Expect(msg).NotTo(ContainSubstring(egressSecret), "endpoint %s", endpoint)
			}
		}, SpecTimeout(2*time.Minute))
	})

	Context("with --allow-http-in-namespaced-policies", Ordered, func() {
		var (
			attacker client.Client
			servers  egressServers
		)
		BeforeAll(func(ctx SpecContext) {
			skipUnlessClusterReachesCharter()
			createNamespaces(ctx, egressOpenCharterNamespace, egressTeam)
			attacker = namespaceAdmin(ctx, egressAttacker, egressTeam, egressAttackerRules()...)
			servers = startEgressServers()
			startCharterWith(ctx, egressOpenCharterNamespace, "admission", "--allow-http-in-namespaced-policies")
			waitPolicyWebhook(ctx)
		}, NodeTimeout(3*time.Minute))

		It("keeps a namespaced policy's CEL http off loopback in any spelling", func(ctx SpecContext) {
			port := servers.port(servers.token)
			for i, target := range []string{
				"http://[::ffff:127.0.0.1]:" + port + "/token",
				"http://0.0.0.0:" + port + "/token",
				"http://[::]:" + port + "/token",
			} {
				name := fmt.Sprintf("cel-steal-%d", i)
				p := &policiesv1.NamespacedValidatingPolicy{}
				manifest := strings.NewReplacer("NAME", name, "URL", target).Replace(egressTenantCELPolicy)
				Expect(yaml.UnmarshalStrict([]byte(manifest), p)).To(Succeed())
				Eventually(func() error { return client.IgnoreAlreadyExists(attacker.Create(ctx, p.DeepCopy())) }).
					WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(Succeed(), "allowed in namespaced policies: %s", target)
				DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(suite.client.Delete(ctx, p))).To(Succeed()) })
				probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + name, Namespace: egressTeam,
					Labels: map[string]string{"e2e-sec-egress-cel": name}}}
				var msg string
				Eventually(func() string {
					msg = denial(ctx, attacker, probe)
					return msg
				}).WithTimeout(60*time.Second).WithPolling(500*time.Millisecond).Should(ContainSubstring(name), "the policy is served: %s", target)
				Expect(msg).To(ContainSubstring("is blocked"), "target %s", target)
				Expect(msg).NotTo(ContainSubstring(egressSecret), "target %s", target)
			}
		}, SpecTimeout(4*time.Minute))
	})
})
