package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/internal/imagetest"
)

const (
	ivpolNamespace        = "e2e-ivpol"
	ivpolCharterNamespace = "e2e-ivpol-charter"
	ivpolPolicy           = "e2e-ivpol-signed"
)

// ivpolSigned denies the Pods of its namespace whose images from the
// registry %[1]s are not signed by the key %[2]s, offline (no
// transparency log). mutateDigest, verifyDigest and required keep their
// defaults.
const ivpolSigned = `
apiVersion: policies.kyverno.io/v1
kind: ImageValidatingPolicy
metadata: {name: e2e-ivpol-signed}
spec:
  validationActions: [Deny]
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: e2e-ivpol}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  matchImageReferences: [{glob: "%[1]s/*"}]
  attestors:
  - name: release
    cosign:
      key: {data: %[2]s}
      ctlog: {insecureIgnoreTlog: true, insecureIgnoreSCT: true}
  validations:
  - expression: "images.containers.all(i, verifyImageSignatures(i, [attestors.release]) > 0)"
    message: image is not signed by the release key
`

// The celpolicies ImageValidatingPolicy specs run `charter serve
// --controllers=admission,reports` with an ImageValidatingPolicy installed
// through the API and a registry on loopback: the policy becomes Ready, an
// unsigned image is denied and a signed one admitted, pinned to its
// digest.
var _ = Describe("CEL policies: ImageValidatingPolicy", Label("celpolicies"), Ordered, func() {
	var (
		cl               client.Client
		signed, unsigned imagetest.Image
	)
	imagePod := func(name, image string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ivpolNamespace},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}
	}

	BeforeAll(func(ctx SpecContext) {
		skipUnlessClusterReachesCharter()
		cl = suite.client
		// The registry runs in this process on loopback; charter serve
		// runs on this machine too and verifies against it.
		reg := imagetest.NewRegistry(GinkgoT())
		key := imagetest.NewKey(GinkgoT())
		signed = reg.Push(GinkgoT(), "app", "signed")
		reg.Sign(GinkgoT(), signed, key.Signer, imagetest.SignOptions{})
		unsigned = reg.Push(GinkgoT(), "app", "unsigned")

		createNamespaces(ctx, ivpolNamespace, ivpolCharterNamespace)
		// charter runs on this machine whatever the cluster: it verifies
		// against the loopback registry.
		startCharterWith(ctx, ivpolCharterNamespace, "admission,reports", "--egress-allow="+reg.Host)
		waitPolicyWebhook(ctx)
		pem, _ := json.Marshal(key.PublicPEM)
		installPolicy(ctx, &policiesv1.ImageValidatingPolicy{}, fmt.Sprintf(ivpolSigned, reg.Host, pem))
	}, NodeTimeout(3*time.Minute))

	It("marks the ImageValidatingPolicy Ready", func(ctx SpecContext) {
		waitReady(ctx, &policiesv1.ImageValidatingPolicy{ObjectMeta: metav1.ObjectMeta{Name: ivpolPolicy}})
	}, SpecTimeout(60*time.Second))

	It("denies an unsigned image, saying why", func(ctx SpecContext) {
		// Served once the policy's webhook rules are registered.
		Eventually(func() error {
			err := cl.Create(ctx, imagePod("unsigned", unsigned.Ref), client.DryRunAll)
			if err == nil {
				return fmt.Errorf("unsigned image admitted")
			}
			if want := "Policy " + ivpolPolicy + " failed: image is not signed by the release key"; !strings.Contains(err.Error(), want) {
				return fmt.Errorf("got %v, want a denial containing %q", err, want)
			}
			return nil
		}).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}, SpecTimeout(90*time.Second))

	It("admits a signed image, pinned to its digest", func(ctx SpecContext) {
		pod := imagePod("signed", signed.Ref)
		Expect(cl.Create(ctx, pod)).To(Succeed())
		Expect(pod.Spec.Containers[0].Image).To(Equal(signed.Ref + "@" + signed.Digest))
	}, SpecTimeout(30*time.Second))
})
