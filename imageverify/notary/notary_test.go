package notary_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/imageverify/notary"
	"github.com/charter-dev/charter/internal/imagetest"
)

const sbomType = "application/vnd.cyclonedx+json"

// fixture is a loopback registry holding images signed with notation's
// own signer and client, by a CA made for the test.
type fixture struct {
	reg                            *imagetest.Registry
	trust, other                   notary.Trust
	signed, unsigned, wrongCA      imagetest.Image
	tampered, attested, unattested imagetest.Image
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{reg: imagetest.NewRegistry(t)}
	ca, otherCA := imagetest.NewCA(t, "notary test CA"), imagetest.NewCA(t, "another CA")
	f.trust, f.other = trustOf(t, ca.RootPEM), trustOf(t, otherCA.RootPEM)
	s, wrong := ca.NotarySigner(t, "signer"), otherCA.NotarySigner(t, "someone else")

	f.signed = f.reg.Push(t, "app", "signed")
	f.reg.NotarySign(t, f.signed.DigestRef, s)
	f.unsigned = f.reg.Push(t, "app", "unsigned")
	f.wrongCA = f.reg.Push(t, "app", "wrong-ca")
	f.reg.NotarySign(t, f.wrongCA.DigestRef, wrong)
	f.tampered = f.reg.Push(t, "app", "tampered")
	f.reg.NotarySign(t, f.tampered.DigestRef, s)
	f.reg.NotaryTamper(t, f.tampered.DigestRef)

	// attested: an SBOM referrer signed by the CA's signer, beside one
	// signed by nobody; unattested: only an unsigned SBOM.
	f.attested = f.reg.Push(t, "app", "attested")
	f.reg.NotarySign(t, f.attested.DigestRef, s)
	f.reg.Attach(t, f.attested, sbomType, map[string]any{"bomFormat": "CycloneDX", "serialNumber": "unsigned"})
	sbom := f.reg.Attach(t, f.attested, sbomType, map[string]any{"bomFormat": "CycloneDX", "serialNumber": "signed"})
	f.reg.NotarySign(t, sbom.DigestRef, s)
	f.unattested = f.reg.Push(t, "app", "unattested")
	f.reg.Attach(t, f.unattested, sbomType, map[string]any{"bomFormat": "CycloneDX"})
	return f
}

func trustOf(t *testing.T, pem string) notary.Trust {
	t.Helper()
	certs, err := loader.ParseCertificates(pem)
	if err != nil {
		t.Fatal(err)
	}
	return notary.Trust{Certs: certs}
}

func (f *fixture) registry() notary.Registry {
	return notary.Registry{Options: []remote.Option{remote.WithContext(context.Background())}, HTTP: &http.Client{Transport: http.DefaultTransport}}
}

func digestOf(t *testing.T, img imagetest.Image) name.Digest {
	t.Helper()
	d, err := name.NewDigest(img.DigestRef)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestVerifySignature: a signature by a certificate of the trusted CA
// verifies; no signature, another CA's, or one whose bytes changed after
// signing does not.
func TestVerifySignature(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name  string
		image imagetest.Image
		trust notary.Trust
		fault string
	}{
		{"signed", f.signed, f.trust, ""},
		{"signed, another CA trusted", f.signed, f.other, "signature verification failed"},
		{"unsigned", f.unsigned, f.trust, "no signature is associated"},
		{"signed by another CA", f.wrongCA, f.trust, "signature verification failed"},
		{"signature tampered with", f.tampered, f.trust, "signature verification failed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := notary.VerifySignature(context.Background(), digestOf(t, c.image), c.trust, f.registry())
			switch {
			case c.fault == "" && err != nil:
				t.Fatalf("want verified, got %v", err)
			case c.fault != "" && (err == nil || !strings.Contains(err.Error(), c.fault)):
				t.Fatalf("want an error with %q, got %v", c.fault, err)
			}
		})
	}
}

// TestVerifyAttestation: the first referrer of the type whose own
// signature verifies is the statement (manifest, type, predicate); an
// unsigned referrer never is.
func TestVerifyAttestation(t *testing.T) {
	f := newFixture(t)
	st, err := notary.VerifyAttestation(context.Background(), digestOf(t, f.attested), sbomType, f.trust, f.registry())
	if err != nil {
		t.Fatal(err)
	}
	pred, _ := st["predicate"].(map[string]any)
	if st["type"] != sbomType || st["artifactType"] != sbomType || pred["serialNumber"] != "signed" {
		t.Fatalf("statement %v: want type and artifactType %s and the signed SBOM as predicate", st, sbomType)
	}
	for _, c := range []struct {
		name  string
		image imagetest.Image
		typ   string
		trust notary.Trust
	}{
		{"only an unsigned referrer", f.unattested, sbomType, f.trust},
		{"no referrer of the type", f.attested, "application/spdx+json", f.trust},
		{"signed by an untrusted CA", f.attested, sbomType, f.other},
	} {
		_, err := notary.VerifyAttestation(context.Background(), digestOf(t, c.image), c.typ, c.trust, f.registry())
		if err == nil || !strings.Contains(err.Error(), "no matching attestations found for image") {
			t.Errorf("%s: want no matching attestation, got %v", c.name, err)
		}
	}
}
