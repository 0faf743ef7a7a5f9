package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The certificate rotation specs run their own charter, in namespaces of
// their own, so they hold whatever order the suite runs in.
const (
	certsCharterNamespace = "charter-certs"
	certsNamespace        = "e2e-certs"
	// The Secrets charter keeps its serving certificate and its CA in:
	// <service>.<namespace>.svc.charter-tls-{pair,ca}, service charter-svc.
	certsTLSSecret = "charter-svc." + certsCharterNamespace + ".svc.charter-tls-pair"
	certsCASecret  = "charter-svc." + certsCharterNamespace + ".svc.charter-tls-ca"

	certsPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: certs-require-name}
spec:
  validationFailureAction: Enforce
  rules:
  - name: check-name
    match: {any: [{resources: {kinds: [Pod], namespaces: [e2e-certs]}}]}
    validate:
      message: "label 'app.kubernetes.io/name' is required"
      pattern: {metadata: {labels: {app.kubernetes.io/name: "?*"}}}
`
)

var _ = Describe("Certificate rotation", Label("admission"), Ordered, func() {
	var cl client.Client

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		for _, ns := range []string{certsCharterNamespace, certsNamespace} {
			err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
		}
		waitDefaultServiceAccounts(ctx, certsNamespace)
		// charter runs on this machine whatever the cluster: the specs
		// read the certificate its one process serves.
		startCharterWith(ctx, certsCharterNamespace, "admission")
		// The policy webhook refuses writes until charter serves it.
		Eventually(func() error {
			return client.IgnoreAlreadyExists(cl.Create(ctx, clusterPolicy(certsPolicy)))
		}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(cl.Delete(ctx, clusterPolicy(certsPolicy)))).To(Succeed())
		})
		Eventually(func() error {
			return refusedByCharter(ctx, certsPod("probe", false))
		}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}, NodeTimeout(3*time.Minute))

	// Each entry deletes Secrets while a stream of dry-run Pod creations
	// runs through charter's fail-closed webhook. charter must answer
	// every one: a TLS failure or a failed webhook call is a hit.
	DescribeTable("fails no admission while certificates are reissued, and serves the new ones",
		func(ctx SpecContext, deleted []string, wantNewCA bool) {
			addr := webhookAddress(ctx)
			before := servedCertificate(addr)
			caBefore := certsSecret(ctx, certsCASecret)
			stream := startPodStream(ctx, cl, 4)
			trust := startTrustWatch(ctx, addr)

			// Let the stream run on the old certificate first.
			Eventually(stream.answered).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 40))

			By(fmt.Sprintf("deleting %s", strings.Join(deleted, " and ")))
			for _, name := range deleted {
				Expect(cl.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: certsCharterNamespace, Name: name}})).To(Succeed())
			}
			var reissued *x509.Certificate
			Eventually(func(g Gomega) {
				var s corev1.Secret
				g.Expect(cl.Get(ctx, client.ObjectKey{Namespace: certsCharterNamespace, Name: certsTLSSecret}, &s)).To(Succeed())
				reissued = leafOf(g, s.Data[corev1.TLSCertKey])
				g.Expect(reissued.Equal(before)).To(BeFalse(), "the TLS Secret still holds the old certificate")
			}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
			signedByOldCA := verifiesAgainst(reissued, caBefore.Data[corev1.TLSCertKey]) == nil
			Expect(signedByOldCA).To(Equal(!wantNewCA), "the new certificate is signed by the old CA")

			By("waiting until charter serves the new certificate")
			Eventually(func() bool { return servedCertificate(addr).Equal(reissued) }).
				WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(BeTrue())

			// And keep admitting on it.
			served := stream.answered()
			Eventually(stream.answered).WithTimeout(30 * time.Second).Should(BeNumerically(">=", served+40))
			stream.stop()
			trust.stop()

			Expect(stream.unexpected()).To(BeEmpty(), "admissions not answered by charter during rotation")
			Expect(trust.checked.Load()).To(BeNumerically(">", 10))
			Expect(trust.unexpected()).To(BeEmpty(), "moments when the published caBundle did not trust the certificate charter served")
			GinkgoWriter.Printf("rotation: %d admitted, %d refused by charter, 0 failed\n", stream.admitted.Load(), stream.refused.Load())
			Expect(stream.admitted.Load()).To(BeNumerically(">", 0))
			Expect(stream.refused.Load()).To(BeNumerically(">", 0))

			// The webhooks still trust the old certificate, which a replica
			// may serve for a moment yet, and trust the new one.
			bundle := publishedCABundle(ctx)
			Expect(verifiesAgainst(before, bundle)).To(Succeed(), "the published caBundle dropped the CA of the old certificate")
			Expect(verifiesAgainst(reissued, bundle)).To(Succeed(), "the published caBundle does not trust the new certificate")
		},
		Entry("the TLS Secret deleted", []string{certsTLSSecret}, false, SpecTimeout(4*time.Minute)),
		Entry("the CA Secret deleted", []string{certsCASecret}, true, SpecTimeout(4*time.Minute)),
		Entry("both Secrets deleted", []string{certsCASecret, certsTLSSecret}, true, SpecTimeout(4*time.Minute)),
	)
})

// trustWatch checks, over and over, that the published caBundle trusts
// the certificate charter serves. The bundle is read after the
// certificate, so a bundle published ahead of a new certificate passes
// and one that drops a CA still served fails.
type trustWatch struct {
	checked atomic.Int64
	workers
}

func startTrustWatch(ctx context.Context, addr string) *trustWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &trustWatch{}
	w.cancel = cancel
	w.wg.Add(1)
	go func() {
		defer GinkgoRecover()
		defer w.wg.Done()
		for ctx.Err() == nil {
			if err := servedIsTrusted(ctx, addr); err != nil && ctx.Err() == nil {
				w.record(time.Now().Format(time.StampMilli) + ": " + err.Error())
			}
			w.checked.Add(1)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return w
}

func servedIsTrusted(ctx context.Context, addr string) error {
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // checked below against the published bundle
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	leaf := conn.ConnectionState().PeerCertificates[0]
	_ = conn.Close()
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := suite.client.Get(ctx, client.ObjectKey{Name: resourceValidatingName}, &v); err != nil {
		return err
	}
	for _, w := range v.Webhooks {
		if w.Name == validateWebhookFail {
			if err := verifiesAgainst(leaf, w.ClientConfig.CABundle); err != nil {
				return fmt.Errorf("certificate serial %s: %w", leaf.SerialNumber, err)
			}
			return nil
		}
	}
	return fmt.Errorf("no %s webhook", validateWebhookFail)
}

func certsSecret(ctx context.Context, name string) *corev1.Secret {
	var s corev1.Secret
	Expect(suite.client.Get(ctx, client.ObjectKey{Namespace: certsCharterNamespace, Name: name}, &s)).To(Succeed())
	return &s
}

// publishedCABundle is the caBundle of charter's fail-closed validating
// webhook: what the API server trusts.
func publishedCABundle(ctx context.Context) []byte {
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	Expect(suite.client.Get(ctx, client.ObjectKey{Name: resourceValidatingName}, &v)).To(Succeed())
	for _, w := range v.Webhooks {
		if w.Name == validateWebhookFail {
			return w.ClientConfig.CABundle
		}
	}
	Fail("no " + validateWebhookFail + " webhook")
	return nil
}

// verifiesAgainst checks that leaf chains to a CA of the PEM bundle, as a
// server certificate for the address where the API server calls charter.
func verifiesAgainst(leaf *x509.Certificate, bundle []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return fmt.Errorf("no certificate in the bundle")
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: suite.hostAddress, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

// podStream dry-runs Pod creations from several clients until stopped: good ones,
// which charter admits, and bad ones, which charter refuses. Any other
// outcome (the API server failed to call the webhook, a TLS error) is
// recorded as unexpected.
type podStream struct {
	admitted, refused atomic.Int64
	workers
}

// workers are goroutines that run until stopped and record what went
// wrong.
type workers struct {
	mu     sync.Mutex
	errs   []string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (w *workers) record(msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errs = append(w.errs, msg)
}

func startPodStream(ctx context.Context, cl client.Client, workers int) *podStream {
	ctx, cancel := context.WithCancel(ctx)
	s := &podStream{}
	s.cancel = cancel
	for w := range workers {
		s.wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer s.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				good := (i+w)%2 == 0
				// Dry-run: every call goes through admission, nothing is stored.
				err := cl.Create(ctx, certsPod(fmt.Sprintf("w%d-%d", w, i), good), client.DryRunAll)
				switch {
				case ctx.Err() != nil:
					return
				case err == nil && good:
					s.admitted.Add(1)
				case err != nil && !good && strings.Contains(err.Error(), `admission webhook "`+validateWebhookFail+`" denied the request`):
					s.refused.Add(1)
				default:
					s.record(fmt.Sprintf("good=%v: %v", good, err))
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return s
}

func (s *podStream) answered() int64 { return s.admitted.Load() + s.refused.Load() }

func (w *workers) stop() {
	w.cancel()
	w.wg.Wait()
}

func (w *workers) unexpected() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.errs...)
}

// certsPod is a Pod in the rotation specs' namespace, with the label the
// policy requires when good.
func certsPod(name string, good bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: certsNamespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
	}
	if good {
		p.Labels = map[string]string{"app.kubernetes.io/name": "web"}
	}
	return p
}

// webhookAddress is the host:port charter serves, from the URL of its
// fail-closed validating webhook.
func webhookAddress(ctx context.Context) string {
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	Expect(suite.client.Get(ctx, client.ObjectKey{Name: resourceValidatingName}, &v)).To(Succeed())
	for _, w := range v.Webhooks {
		if w.Name == validateWebhookFail && w.ClientConfig.URL != nil {
			u, err := url.Parse(*w.ClientConfig.URL)
			Expect(err).NotTo(HaveOccurred())
			return u.Host
		}
	}
	Fail("no " + validateWebhookFail + " webhook with a URL")
	return ""
}

// servedCertificate is the leaf certificate charter presents now. The
// handshake only reads it; trust is the API server's business.
func servedCertificate(addr string) *x509.Certificate {
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reading the certificate, not trusting it
	Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	Expect(certs).NotTo(BeEmpty())
	return certs[0]
}

func leafOf(g Gomega, pemData []byte) *x509.Certificate {
	block, _ := pem.Decode(pemData)
	g.Expect(block).NotTo(BeNil(), "tls.crt holds no PEM block")
	c, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	return c
}
