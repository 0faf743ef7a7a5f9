package imageverify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/internal/imagetest"
)

const cyclonedx = "application/vnd.cyclonedx+json"

// notaryPolicy is an ImageValidatingPolicy on Pods whose attestor
// "notary" trusts the CA certs (PEM), beside a cosign attestor, with the
// sbom attestation (a CycloneDX referrer) and one validation.
func notaryPolicy(t *testing.T, refs, certs, validation string) kyvernov1.PolicyInterface {
	t.Helper()
	attestors := fmt.Sprintf("- name: notary\n  notary: {certs: {value: %s}}\n- name: cosign\n  cosign: {key: {data: %s}}\n", jsonString(certs), jsonString(imagetest.NewKey(t).PublicPEM))
	return ivpolOf(t, refs, attestors, fmt.Sprintf("- name: sbom\n  referrer: {type: %q}\n", cyclonedx), validation)
}

// TestImageValidatingPolicyNotary verifies Notary signatures made with
// notation's own signer and client, and their signed SBOM referrers,
// through an ImageValidatingPolicy's notary attestor, from a loopback
// registry: a signature of the trusted CA passes; no signature, another
// CA's, or one tampered with after signing fails; an SBOM counts only
// when its referrer is signed, and extractPayload is its JSON.
func TestImageValidatingPolicyNotary(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	ca, otherCA := imagetest.NewCA(t, "notary CA"), imagetest.NewCA(t, "another CA")
	release, stranger := ca.NotarySigner(t, "release"), otherCA.NotarySigner(t, "stranger")
	signed := reg.Push(t, "app", "signed")
	reg.NotarySign(t, signed.DigestRef, release)
	reg.NotarySign(t, reg.Attach(t, signed, cyclonedx, map[string]any{"bomFormat": "CycloneDX"}).DigestRef, release)
	unsigned := reg.Push(t, "app", "unsigned")
	strange := reg.Push(t, "app", "stranger")
	reg.NotarySign(t, strange.DigestRef, stranger)
	tampered := reg.Push(t, "app", "tampered")
	reg.NotarySign(t, tampered.DigestRef, release)
	reg.NotaryTamper(t, tampered.DigestRef)
	unsignedSBOM := reg.Push(t, "app", "unsigned-sbom")
	reg.NotarySign(t, unsignedSBOM.DigestRef, release)
	reg.Attach(t, unsignedSBOM, cyclonedx, map[string]any{"bomFormat": "CycloneDX"})

	const signatures = "images.containers.all(i, verifyImageSignatures(i, [attestors.notary]) > 0)"
	const sbom = "images.containers.all(i, verifyAttestationSignatures(i, attestations.sbom, [attestors.notary]) > 0 && extractPayload(i, attestations.sbom).bomFormat == 'CycloneDX')"
	v := newVerifier()
	cases := []struct {
		name, validation, image string
		status                  engine.RuleStatus
		message                 string
	}{
		{"signed by the trusted CA", signatures, signed.DigestRef, engine.StatusPass, "success"},
		{"unsigned", signatures, unsigned.DigestRef, engine.StatusFail, "not verified"},
		{"signed by another CA", signatures, strange.DigestRef, engine.StatusFail, "not verified"},
		{"signature tampered with", signatures, tampered.DigestRef, engine.StatusFail, "not verified"},
		{"signed SBOM and its payload", sbom, signed.DigestRef, engine.StatusPass, "success"},
		{"unsigned SBOM", sbom, unsignedSBOM.DigestRef, engine.StatusFail, "not verified"},
		{"payload before any verification", "images.containers.all(i, extractPayload(i, attestations.sbom).bomFormat == 'CycloneDX')", signed.DigestRef,
			engine.StatusError, "failed to evaluate policy: referrer attestation payload cannot be fetched before verifying the referrer attestation"},
		{"a referrer is no cosign attestation", "images.containers.all(i, verifyAttestationSignatures(i, attestations.sbom, [attestors.cosign]) > 0)", signed.DigestRef,
			engine.StatusError, "failed to evaluate policy: cosign verifier only supports intoto referrers as attestations"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := notaryPolicy(t, reg.Host+"/*", ca.RootPEM, c.validation)
			set, err := engine.Compile([]kyvernov1.PolicyInterface{p})
			if err != nil {
				t.Fatal(err)
			}
			resp := set.Validate(context.Background(), &engine.Request{Operation: kyvernov1.Create, Object: pod(c.image)},
				engine.WithLoaders(loader.Loaders{ImageVerifier: v}))
			rr := onlyRule(t, resp.Policies)
			if rr.Status != c.status || !strings.HasPrefix(rr.Message, c.message) {
				t.Fatalf("got %s %q, want %s %q", rr.Status, rr.Message, c.status, c.message)
			}
		})
	}
}
