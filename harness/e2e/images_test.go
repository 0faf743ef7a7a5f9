package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/internal/imagetest"
)

// Namespaces of the image specs: charter's own, and one per policy.
const (
	imagesCharterNamespace = "e2e-images-charter"
	imagesEnforce          = "e2e-images-enforce"
	imagesAudit            = "e2e-images-audit"
	imagesIgnore           = "e2e-images-ignore"
)

// imagesPolicy is a ClusterPolicy verifying the registry's app images
// with key in namespace, offline (no transparency log); extra is more
// fields of its one entry, spec the policy-wide ones.
func imagesPolicy(name, namespace, host, key, spec, extra string) string {
	pem, _ := json.Marshal(key)
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: %s}
spec:
%s  rules:
  - name: verify
    match: {any: [{resources: {kinds: [Pod], namespaces: [%s]}}]}
    verifyImages:
    - imageReferences: ["%s/app*"]
%s      attestors:
      - entries:
        - keys:
            publicKeys: %s
            rekor: {url: "http://127.0.0.1:1", ignoreTlog: true}
`, name, spec, namespace, host, extra, pem)
}

// warningCollector keeps the warnings the API server returns.
type warningCollector struct {
	mu    sync.Mutex
	texts []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.texts = append(w.texts, text)
}

func (w *warningCollector) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.texts
	w.texts = nil
	return out
}

var _ = Describe("Image verification", Label("images"), Ordered, func() {
	var (
		cl       client.Client
		kube     kubernetes.Interface
		warnings = &warningCollector{}
		reg      *imagetest.Registry
		signed   imagetest.Image
		unsigned imagetest.Image
		late     imagetest.Image // signed, never verified before the registry goes away
	)
	imagePod := func(namespace, name, image string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}
	}

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		cfg := rest.CopyConfig(suite.config)
		cfg.WarningHandler = warnings
		var err error
		kube, err = kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())

		// The registry runs in this process on loopback; charter serve
		// runs on this machine too and verifies against it.
		reg = imagetest.NewRegistry(GinkgoT())
		key := imagetest.NewKey(GinkgoT())
		signed = reg.Push(GinkgoT(), "app", "signed")
		reg.Sign(GinkgoT(), signed, key.Signer, imagetest.SignOptions{})
		unsigned = reg.Push(GinkgoT(), "app", "unsigned")
		late = reg.Push(GinkgoT(), "app", "late")
		reg.Sign(GinkgoT(), late, key.Signer, imagetest.SignOptions{})

		for _, ns := range []string{imagesCharterNamespace, imagesEnforce, imagesAudit, imagesIgnore} {
			Expect(client.IgnoreAlreadyExists(cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		}
		waitDefaultServiceAccounts(ctx, imagesEnforce, imagesAudit, imagesIgnore)
		// charter blocks loopback by default: the test registry is let
		// through by name.
		startCharterWith(ctx, imagesCharterNamespace, "admission,reports", "--egress-allow="+reg.Host)
		waitPolicyWebhook(ctx)

		policies := []string{
			imagesPolicy("images-enforce", imagesEnforce, reg.Host, key.PublicPEM, "  validationFailureAction: Enforce\n", ""),
			imagesPolicy("images-audit", imagesAudit, reg.Host, key.PublicPEM, "  validationFailureAction: Audit\n", "      mutateDigest: false\n"),
			imagesPolicy("images-ignore", imagesIgnore, reg.Host, key.PublicPEM, "  validationFailureAction: Enforce\n  failurePolicy: Ignore\n",
				"      required: false\n      verifyDigest: false\n"),
		}
		for _, manifest := range policies {
			p := clusterPolicy(manifest)
			Eventually(func() error { return client.IgnoreAlreadyExists(cl.Create(ctx, p)) }).
				WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
			DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(cl.Delete(ctx, p))).To(Succeed()) })
		}
		// Ready: the mutating webhook that pins digests is configured too,
		// not only the validating one the probe below meets (the first
		// spec once found the digest unpinned and was refused "missing
		// digest").
		for _, manifest := range policies {
			waitReady(ctx, clusterPolicy(manifest))
		}
		// Served once the unsigned image is refused in the Enforce
		// namespace.
		Eventually(func() error {
			_, err := kube.CoreV1().Pods(imagesEnforce).Create(ctx, imagePod(imagesEnforce, "probe", unsigned.Ref), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err == nil {
				return fmt.Errorf("unsigned image admitted")
			}
			if !strings.Contains(err.Error(), "was blocked due to the following policies") {
				return err
			}
			return nil
		}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}, NodeTimeout(3*time.Minute))

	It("admits a signed image and pins it to the digest verified", func(ctx SpecContext) {
		created, err := kube.CoreV1().Pods(imagesEnforce).Create(ctx, imagePod(imagesEnforce, "signed", signed.Ref), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(created.Spec.Containers[0].Image).To(Equal(signed.Ref + "@" + signed.Digest))
		Expect(created.Annotations).To(HaveKeyWithValue("kyverno.io/verify-images", `{"`+signed.DigestRef+`":"pass"}`))
	}, SpecTimeout(30*time.Second))

	It("denies an unsigned image in Enforce, saying why", func(ctx SpecContext) {
		_, err := kube.CoreV1().Pods(imagesEnforce).Create(ctx, imagePod(imagesEnforce, "unsigned", unsigned.Ref), metav1.CreateOptions{})
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(And(
			ContainSubstring("resource Pod/"+imagesEnforce+"/unsigned was blocked due to the following policies"),
			ContainSubstring("images-enforce:"),
			ContainSubstring("failed to verify image "+unsigned.Ref+": .attestors[0].entries[0].keys: no signatures found")))
	}, SpecTimeout(30*time.Second))

	It("admits an unsigned image in Audit with a warning and reports the failure", func(ctx SpecContext) {
		warnings.take()
		created, err := kube.CoreV1().Pods(imagesAudit).Create(ctx, imagePod(imagesAudit, "unsigned", unsigned.Ref), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(created.Spec.Containers[0].Image).To(Equal(unsigned.Ref), "Audit never pins")
		Expect(warnings.take()).To(ContainElement(ContainSubstring("policy images-audit.verify: failed to verify image " + unsigned.Ref)))
		rep := waitReport(ctx, created, "images-audit/verify=fail")
		Expect(rep.Results[0].Message).To(ContainSubstring(unsigned.Ref))
	}, SpecTimeout(60*time.Second))

	It("denies in Enforce and admits with a warning under Ignore when the registry is gone", func(ctx SpecContext) {
		reg.Server.Close()
		_, err := kube.CoreV1().Pods(imagesEnforce).Create(ctx, imagePod(imagesEnforce, "late", late.Ref), metav1.CreateOptions{})
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(And(
			ContainSubstring("resource Pod/"+imagesEnforce+"/late was blocked due to the following policies"),
			ContainSubstring("failed to verify image "+late.Ref)))

		warnings.take()
		created, err := kube.CoreV1().Pods(imagesIgnore).Create(ctx, imagePod(imagesIgnore, "late", late.Ref), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(created.Spec.Containers[0].Image).To(Equal(late.Ref))
		Expect(warnings.take()).To(ContainElement(ContainSubstring("policy images-ignore.verify: failed to verify image " + late.Ref)))
	}, SpecTimeout(60*time.Second))
})
