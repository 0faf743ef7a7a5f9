package admission

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policiesv1 "github.com/charter-dev/charter/api/policies/v1"
	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/imagetest"
)

// ivpolManifests are the policies of TestImageValidatingPolicyOnRealAPIServer:
// an ImageValidatingPolicy on the Pods of namespace shop (Deny; the default
// mutateDigest, verifyDigest and required), a
// NamespacedImageValidatingPolicy of namespace team-a, and one of namespace
// audit under [Audit, Warn], all trusting the key %[2]s for the images of
// registry %[1]s; and a NamespacedImageValidatingPolicy of namespace notary
// whose notary attestor trusts the CA %[3]s for the image's signature and
// its signed SBOM referrer.
const ivpolManifests = `
apiVersion: policies.kyverno.io/v1
kind: ImageValidatingPolicy
metadata: {name: signed-images}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: shop}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  matchImageReferences: [{glob: "%[1]s/*"}]
  attestors:
  - name: release
    cosign:
      key: {data: %[2]s}
      ctlog: {insecureIgnoreTlog: true, insecureIgnoreSCT: true}
  validations:
  - expression: "images.containers.all(i, verifyImageSignatures(i, [attestors.release]) > 0)"
    message: image is not signed by the release key
---
apiVersion: policies.kyverno.io/v1
kind: NamespacedImageValidatingPolicy
metadata: {name: team-images, namespace: team-a}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  matchImageReferences: [{glob: "%[1]s/*"}]
  attestors:
  - name: release
    cosign:
      key: {data: %[2]s}
      ctlog: {insecureIgnoreTlog: true, insecureIgnoreSCT: true}
  validations:
  - expression: "images.containers.all(i, verifyImageSignatures(i, [attestors.release]) > 0)"
    message: team-a runs signed images only
---
apiVersion: policies.kyverno.io/v1
kind: NamespacedImageValidatingPolicy
metadata: {name: audit-images, namespace: audit}
spec:
  validationActions: [Audit, Warn]
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  matchImageReferences: [{glob: "%[1]s/*"}]
  validationConfigurations: {mutateDigest: false, verifyDigest: false}
  attestors:
  - name: release
    cosign:
      key: {data: %[2]s}
      ctlog: {insecureIgnoreTlog: true, insecureIgnoreSCT: true}
  validations:
  - expression: "images.containers.all(i, verifyImageSignatures(i, [attestors.release]) > 0)"
    message: audited, not signed
---
apiVersion: policies.kyverno.io/v1
kind: NamespacedImageValidatingPolicy
metadata: {name: notary-images, namespace: notary}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  matchImageReferences: [{glob: "%[1]s/*"}]
  attestors:
  - name: notary
    notary: {certs: {value: %[3]s}}
  attestations:
  - name: sbom
    referrer: {type: application/vnd.cyclonedx+json}
  validations:
  - expression: "images.containers.all(i, verifyImageSignatures(i, [attestors.notary]) > 0)"
    message: image is not signed by the notary CA
  - expression: "images.containers.all(i, verifyAttestationSignatures(i, attestations.sbom, [attestors.notary]) > 0 && extractPayload(i, attestations.sbom).bomFormat == 'CycloneDX')"
    message: image has no signed SBOM
`

// ivpolWithoutAttestors pins the images of registry %[1]s in namespace
// pins to their digest and verifies nothing, as Kyverno's chainsaw test
// image-validating-policies/mutate-digest's policy does.
const ivpolWithoutAttestors = `
apiVersion: policies.kyverno.io/v1
kind: ImageValidatingPolicy
metadata: {name: pin-digests}
spec:
  failurePolicy: Fail
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: pins}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  matchImageReferences: [{glob: "%[1]s/**"}]
  validationConfigurations: {mutateDigest: true, verifyDigest: false, required: false}
  attestors: []
  validations:
  - expression: "true"
`

// TestImageValidatingPolicyOnRealAPIServer: ImageValidatingPolicies
// installed in the cluster become Ready; a Pod naming a signed image by
// tag is admitted with the image pinned to the digest its tag names
// (mutateDigest) and that digest verified; an unsigned image is denied in
// Kyverno's words; a NamespacedImageValidatingPolicy acts in its own
// namespace only; under [Audit, Warn] an unsigned image is admitted with
// Kyverno's warning; a notary attestor verifies Notary signatures and
// signed referrers; a policy without attestors only pins digests; a
// policy whose attestor cannot verify anything is refused.
func TestImageValidatingPolicyOnRealAPIServer(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	key := imagetest.NewKey(t)
	signed := reg.Push(t, "app", "signed")
	reg.Sign(t, signed, key.Signer, imagetest.SignOptions{})
	unsigned := reg.Push(t, "app", "unsigned")
	ca := imagetest.NewCA(t, "notary CA")
	notarySigner := ca.NotarySigner(t, "release")
	notarized := reg.Push(t, "app", "notarized")
	reg.NotarySign(t, notarized.DigestRef, notarySigner)
	reg.NotarySign(t, reg.Attach(t, notarized, "application/vnd.cyclonedx+json", map[string]any{"bomFormat": "CycloneDX"}).DigestRef, notarySigner)
	verifier := imageverify.New(imageverify.Options{Egress: reg.Egress(), Cache: imageverify.NewCache(100, time.Hour, nil)})
	f := startAdmission(t, withNamespaces("shop", "team-a", "team-b", "audit", "pins", "notary"), withOptions(func(o *Options) {
		o.State.Loaders.ImageVerifier = verifier
	}))
	ctx, cl := f.ctx, f.client
	pem, _ := json.Marshal(key.PublicPEM)
	caPEM, _ := json.Marshal(ca.RootPEM)
	policies := f.installReady(t, fmt.Sprintf(ivpolManifests, reg.Host, pem, caPEM))
	podOf := func(name, ns, image string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}
	}

	t.Run("an unsigned image is denied in Kyverno's words", func(t *testing.T) {
		// Once the policy's webhook rules are registered.
		eventually(t, "unsigned Pod denied", 30*time.Second, func() error {
			p := podOf("unsigned", "shop", unsigned.Ref)
			err := cl.Create(ctx, p)
			if err == nil {
				_ = cl.Delete(ctx, p)
				return errNotYet("unsigned Pod admitted")
			}
			if want := "Policy signed-images failed: image is not signed by the release key"; !strings.Contains(err.Error(), want) {
				return fmt.Errorf("got %v, want a denial containing %q", err, want)
			}
			return nil
		})
	})

	t.Run("a signed image named by tag is pinned to its verified digest", func(t *testing.T) {
		p := podOf("signed", "shop", signed.Ref)
		if err := cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if got, want := p.Spec.Containers[0].Image, signed.Ref+"@"+signed.Digest; got != want {
			t.Errorf("stored image %s, want %s", got, want)
		}
	})

	t.Run("a NamespacedImageValidatingPolicy acts in its own namespace only", func(t *testing.T) {
		err := cl.Create(ctx, podOf("unsigned", "team-a", unsigned.DigestRef))
		if want := "Policy team-images failed: team-a runs signed images only"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("team-a: got %v, want a denial containing %q", err, want)
		}
		p := podOf("unsigned", "team-b", unsigned.DigestRef)
		if err := cl.Create(ctx, p); err != nil {
			t.Errorf("team-b: team-a's policy denied a Pod of team-b: %v", err)
		}
	})

	t.Run("a notary attestor admits an image with its signed SBOM and denies an unsigned one", func(t *testing.T) {
		if err := cl.Create(ctx, podOf("notarized", "notary", notarized.DigestRef)); err != nil {
			t.Errorf("notarized image denied: %v", err)
		}
		err := cl.Create(ctx, podOf("unsigned", "notary", unsigned.DigestRef))
		if want := "Policy notary-images failed: image is not signed by the notary CA"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("unsigned image: got %v, want a denial containing %q", err, want)
		}
		err = cl.Create(ctx, podOf("cosigned", "notary", signed.DigestRef))
		if want := "Policy notary-images failed: image is not signed by the notary CA"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("cosign-signed image: got %v, want a denial containing %q", err, want)
		}
	})

	t.Run("Audit and Warn admit an unsigned image with Kyverno's warning, unpinned", func(t *testing.T) {
		warnings := &warningRecorder{}
		cfg := rest.CopyConfig(f.cp.RESTConfig())
		cfg.WarningHandler = warnings
		warned, err := client.New(cfg, client.Options{Scheme: f.scheme})
		if err != nil {
			t.Fatal(err)
		}
		p := podOf("unsigned", "audit", unsigned.Ref)
		if err := warned.Create(ctx, p); err != nil {
			t.Fatalf("Audit denied: %v", err)
		}
		if p.Spec.Containers[0].Image != unsigned.Ref {
			t.Errorf("stored image %s, want it unpinned (mutateDigest false)", p.Spec.Containers[0].Image)
		}
		want := "Policy audit-images failed: audited, not signed"
		if got := warnings.all(); !slices.Contains(got, want) {
			t.Errorf("warnings %q, want %q", got, want)
		}
	})

	t.Run("a policy without attestors is Ready and pins digests only", func(t *testing.T) {
		// Kyverno's chainsaw tests image-validating-policies/mutate-digest
		// and mutate-digest-disabled: no attestors, validations that
		// verify nothing; charter refused the policy.
		f.installReady(t, fmt.Sprintf(ivpolWithoutAttestors, reg.Host))
		// Once the policy's webhook rules are registered.
		eventually(t, "unsigned Pod pinned", 30*time.Second, func() error {
			p := podOf("unsigned", "pins", unsigned.Ref)
			if err := cl.Create(ctx, p); err != nil {
				return err
			}
			if got, want := p.Spec.Containers[0].Image, unsigned.Ref+"@"+unsigned.Digest; got != want {
				_ = cl.Delete(ctx, p)
				return errNotYet(fmt.Sprintf("stored image %s, want %s (mutateDigest)", got, want))
			}
			return nil
		})
	})

	t.Run("a policy whose attestor cannot verify anything is refused, naming the field", func(t *testing.T) {
		broken := policies[0].DeepCopyObject().(*policiesv1.ImageValidatingPolicy)
		broken.ResourceVersion = ""
		broken.Name = "notary"
		broken.Spec.Attestors[0] = policiesv1.Attestor{Name: "release", Notary: &policiesv1.Notary{Certs: &policiesv1.StringOrExpression{Value: "PEM"}}}
		err := cl.Create(ctx, broken)
		if want := "spec.attestors[0].notary.certs.value: not PEM certificates"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want a refusal containing %q", err, want)
		}
	})
}
