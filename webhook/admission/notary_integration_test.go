package admission

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/imagetest"
)

// notaryPolicy verifies, with `type: Notary` (verify-images.md §3.5), the
// images of registry %[1]s run by Pods of namespace notary: signed by a
// certificate the CA %[2]s issued, with a signed CycloneDX referrer; in
// Enforce with the defaults mutateDigest, verifyDigest and required.
const notaryPolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: notary-images}
spec:
  rules:
  - name: notary
    match: {any: [{resources: {kinds: [Pod], namespaces: [notary]}}]}
    verifyImages:
    - imageReferences: ["%[1]s/*"]
      type: Notary
      failureAction: Enforce
      attestors:
      - entries:
        - certificates:
            cert: %[2]s
      attestations:
      - type: application/vnd.cyclonedx+json
        attestors:
        - entries:
          - certificates:
              cert: %[2]s
        conditions:
        - all:
          - key: "{{ bomFormat }}"
            operator: Equals
            value: CycloneDX
`

// TestNotaryVerifyImagesOnRealAPIServer: a ClusterPolicy verifying images
// with type Notary is Ready, denies a Pod whose image has no Notary
// signature in Kyverno's words, and admits one whose image is signed and
// has its signed SBOM, the image pinned to the digest verified.
func TestNotaryVerifyImagesOnRealAPIServer(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	ca := imagetest.NewCA(t, "notary CA")
	signer := ca.NotarySigner(t, "release")
	signed := reg.Push(t, "app", "signed")
	reg.NotarySign(t, signed.DigestRef, signer)
	reg.NotarySign(t, reg.Attach(t, signed, "application/vnd.cyclonedx+json", map[string]any{"bomFormat": "CycloneDX"}).DigestRef, signer)
	unsigned := reg.Push(t, "app", "unsigned")
	verifier := imageverify.New(imageverify.Options{Egress: reg.Egress(), Cache: imageverify.NewCache(100, time.Hour, nil)})
	f := startAdmission(t, withNamespaces("notary"), withOptions(func(o *Options) {
		o.State.Loaders.ImageVerifier = verifier
	}))
	ctx, cl := f.ctx, f.client
	caPEM, _ := json.Marshal(ca.RootPEM)
	f.installReady(t, fmt.Sprintf(notaryPolicy, reg.Host, caPEM))
	pod := func(name, image string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "notary"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}
	}

	t.Run("an image without a Notary signature is denied", func(t *testing.T) {
		// Once the policy's webhook rules for Pods are registered: the
		// deadline bounds a wait on the API server, not its pace.
		eventually(t, "Pod with an unsigned image denied", 2*time.Minute, func() error {
			p := pod("unsigned", unsigned.Ref)
			err := cl.Create(ctx, p)
			if err == nil {
				_ = cl.Delete(ctx, p)
				return errNotYet("Pod with an unsigned image admitted")
			}
			want := "failed to verify image " + unsigned.Ref + ": .attestors[0].entries[0].certificates: "
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "notary-images") {
				return fmt.Errorf("got %v, want a denial by notary-images containing %q", err, want)
			}
			return nil
		})
	})

	t.Run("a signed image with its signed SBOM is admitted, pinned to its digest", func(t *testing.T) {
		p := pod("signed", signed.Ref)
		if err := cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if got, want := p.Spec.Containers[0].Image, signed.Ref+"@"+signed.Digest; got != want {
			t.Errorf("stored image %s, want %s", got, want)
		}
	})
}
