package imagetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"strings"
	"time"

	"github.com/notaryproject/notation-go"
	notationregistry "github.com/notaryproject/notation-go/registry"
	"github.com/notaryproject/notation-go/signer"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	orasremote "oras.land/oras-go/v2/registry/remote"
)

// NotarySigner signs with a code-signing certificate a CA issued, as the
// notation CLI does with a key and its certificate chain.
type NotarySigner struct {
	signer notation.Signer
}

// NotarySigner issues a Notary code-signing certificate (digital
// signature key usage, CodeSigning extended key usage) and returns a
// signer with the chain leaf, CA.
func (ca *CA) NotarySigner(t T, cn string) *NotarySigner {
	t.Helper()
	return ca.notarySigner(t, cn, nil)
}

// NotarySignerWithRevocation is NotarySigner whose certificate names
// ocsp as its OCSP responder and crl as its CRL distribution point, the
// URLs a verifier fetches to check it is not revoked.
func (ca *CA) NotarySignerWithRevocation(t T, cn, ocsp, crl string) *NotarySigner {
	t.Helper()
	return ca.notarySigner(t, cn, func(c *x509.Certificate) {
		c.OCSPServer, c.CRLDistributionPoints = []string{ocsp}, []string{crl}
	})
}

func (ca *CA) notarySigner(t T, cn string, mutate func(*x509.Certificate)) *NotarySigner {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: []string{"charter test"}},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	}
	if mutate != nil {
		mutate(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	s, err := signer.New(key, []*x509.Certificate{leaf, ca.cert})
	if err != nil {
		t.Fatal(err)
	}
	return &NotarySigner{signer: s}
}

// repository is the registry's repository of ref ("<host>/<repo>@…" or
// "…:tag") through oras, notation's own registry client.
func (r *Registry) repository(t T, ref string) *orasremote.Repository {
	t.Helper()
	repo := ref
	if at := strings.Index(repo, "@"); at >= 0 {
		repo = repo[:at]
	} else if colon := strings.LastIndex(repo, ":"); colon > strings.LastIndex(repo, "/") {
		repo = repo[:colon]
	}
	out, err := orasremote.NewRepository(repo)
	if err != nil {
		t.Fatal(err)
	}
	out.PlainHTTP = true
	return out
}

// NotarySign signs the artifact ref names by digest ("<host>/<repo>@…":
// an image or a referrer) with a JWS Notary signature, pushed as notation
// pushes it: an OCI 1.1 referrer of artifact type
// application/vnd.cncf.notary.signature.
func (r *Registry) NotarySign(t T, ref string, s *NotarySigner) {
	t.Helper()
	repo := notationregistry.NewRepository(r.repository(t, ref))
	opts := notation.SignOptions{ArtifactReference: ref,
		SignerSignOptions: notation.SignerSignOptions{SignatureMediaType: "application/jose+json", ExpiryDuration: time.Hour}}
	if _, err := notation.Sign(context.Background(), s.signer, repo, opts); err != nil {
		t.Fatalf("notation sign %s: %v", ref, err)
	}
}

// Attach pushes an OCI 1.1 referrer of img of the artifact type, with
// one JSON layer holding payload, and returns it as an Image (its
// DigestRef names it for NotarySign).
func (r *Registry) Attach(t T, img Image, artifactType string, payload any) Image {
	t.Helper()
	ctx := context.Background()
	repo := r.repository(t, img.DigestRef)
	subject, err := repo.Resolve(ctx, img.Digest)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	layer, err := oras.PushBytes(ctx, repo, "application/json", data)
	if err != nil {
		t.Fatal(err)
	}
	// The config's media type is the artifact type too, as notation's
	// signature manifests have it: go-containerregistry's registry lists
	// a referrer under its config's media type.
	config, err := oras.PushBytes(ctx, repo, artifactType, []byte("{}"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, artifactType,
		oras.PackManifestOptions{Subject: &subject, Layers: []ocispec.Descriptor{layer}, ConfigDescriptor: &config})
	if err != nil {
		t.Fatal(err)
	}
	name := img.DigestRef[:strings.Index(img.DigestRef, "@")]
	return Image{Ref: name + "@" + m.Digest.String(), Digest: m.Digest.String(), DigestRef: name + "@" + m.Digest.String()}
}

// NotaryTamper rewrites every Notary signature of the artifact: the
// envelope's signature bytes changed, pushed under a new signature
// manifest, the original deleted. What is left is a signature by the
// same certificate that no longer verifies.
func (r *Registry) NotaryTamper(t T, ref string) {
	t.Helper()
	ctx := context.Background()
	repo := r.repository(t, ref)
	subject, err := repo.Resolve(ctx, ref[strings.Index(ref, "@")+1:])
	if err != nil {
		t.Fatal(err)
	}
	var sigs []ocispec.Descriptor
	if err := repo.Referrers(ctx, subject, notationregistry.ArtifactTypeNotation, func(list []ocispec.Descriptor) error {
		sigs = append(sigs, list...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(sigs) == 0 {
		t.Fatalf("%s has no Notary signature to tamper with", ref)
	}
	for _, sig := range sigs {
		raw, err := content.FetchAll(ctx, repo, sig)
		if err != nil {
			t.Fatal(err)
		}
		var m ocispec.Manifest
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		env, err := content.FetchAll(ctx, repo.Blobs(), m.Layers[0])
		if err != nil {
			t.Fatal(err)
		}
		var jws map[string]any
		if err := json.Unmarshal(env, &jws); err != nil {
			t.Fatal(err)
		}
		s, _ := jws["signature"].(string)
		if s == "" {
			t.Fatalf("the envelope of %s has no signature", sig.Digest)
		}
		flip := "A"
		if s[0] == 'A' {
			flip = "B"
		}
		jws["signature"] = flip + s[1:]
		env, err = json.Marshal(jws)
		if err != nil {
			t.Fatal(err)
		}
		layer, err := oras.PushBytes(ctx, repo, m.Layers[0].MediaType, env)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, notationregistry.ArtifactTypeNotation,
			oras.PackManifestOptions{Subject: &subject, Layers: []ocispec.Descriptor{layer}, ConfigDescriptor: &m.Config, ManifestAnnotations: m.Annotations}); err != nil {
			t.Fatal(err)
		}
		if err := repo.Manifests().Delete(ctx, sig); err != nil {
			t.Fatal(err)
		}
	}
}
