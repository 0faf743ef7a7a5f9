// Package imagetest builds signed images for tests, fully offline: an OCI
// registry on loopback (go-containerregistry's pkg/registry), random
// images pushed to it, cosign signatures and in-toto attestations made
// with cosign's Go API, and a local CA that issues Fulcio-style keyless
// certificates (code signing, a SAN, the issuer extension).
package imagetest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	cbundle "github.com/sigstore/cosign/v2/pkg/cosign/bundle"
	"github.com/sigstore/cosign/v2/pkg/oci"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/charter-dev/charter/internal/egress"
)

// T is what the helpers need of a test: testing.TB and Ginkgo's
// GinkgoT() both have it.
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Registry is an OCI registry served on loopback for one test.
type Registry struct {
	Server *httptest.Server
	// Host is "127.0.0.1:<port>".
	Host string
}

// NewRegistry starts a registry that stops when the test ends.
func NewRegistry(t T) *Registry {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(discard()), registry.WithReferrersSupport(true)))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return &Registry{Server: srv, Host: u.Host}
}

// Image is an image pushed to the registry.
type Image struct {
	// Ref is "<host>/<repo>:<tag>".
	Ref string
	// Digest is "sha256:…"; DigestRef is "<host>/<repo>@<digest>".
	Digest    string
	DigestRef string
}

// Push pushes a new random image under repo:tag.
func (r *Registry) Push(t T, repo, tag string) Image {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.Host + "/" + repo + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return Image{Ref: ref.String(), Digest: d.String(), DigestRef: r.Host + "/" + repo + "@" + d.String()}
}

// NewSignedRegistry starts a registry holding <repo>:signed, signed by
// key, and <repo>:unsigned.
func NewSignedRegistry(t T, repo string, key *Key) (reg *Registry, signed, unsigned Image) {
	t.Helper()
	reg = NewRegistry(t)
	signed = reg.Push(t, repo, "signed")
	reg.Sign(t, signed, key.Signer, SignOptions{})
	return reg, signed, reg.Push(t, repo, "unsigned")
}

// Tag points repo:tag at the image.
func (r *Registry) Tag(t T, img Image, tag string) {
	t.Helper()
	d, err := name.NewDigest(img.DigestRef)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Tag(d.Context().Tag(tag), desc); err != nil {
		t.Fatal(err)
	}
}

// Key is an ECDSA P-256 signing key.
type Key struct {
	Signer signature.SignerVerifier
	// PublicPEM is the public key as a policy's publicKeys holds it.
	PublicPEM string
	private   *ecdsa.PrivateKey
}

// NewKey returns a fresh key.
func NewKey(t T) *Key {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return keyOf(t, priv)
}

// LoadKeyFile returns the ECDSA P-256 key of a PEM private key file
// (PKCS#8 or SEC 1): a test key kept in a suite's testdata, whose public
// half a policy file names.
func LoadKeyFile(t T, path string) *Key {
	t.Helper()
	privatePEM, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k, err := cryptoutils.UnmarshalPEMToPrivateKey(privatePEM, cryptoutils.SkipPassword)
	if err != nil {
		t.Fatal(err)
	}
	priv, ok := k.(*ecdsa.PrivateKey)
	if !ok || priv.Curve != elliptic.P256() {
		t.Fatalf("want an ECDSA P-256 key, got %T", k)
	}
	return keyOf(t, priv)
}

func keyOf(t T, priv *ecdsa.PrivateKey) *Key {
	t.Helper()
	sv, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return &Key{Signer: sv, PublicPEM: string(pub), private: priv}
}

// SignOptions shape a signature.
type SignOptions struct {
	// Annotations go to the payload's optional section.
	Annotations map[string]any
	// Cert and Chain (PEM) attach a keyless certificate.
	Cert, Chain []byte
	// ForDigest signs a claim about another digest than the image's.
	ForDigest string
	// OCI11 attaches the signature as an OCI 1.1 referrer of the image
	// (cosign's experimental format) instead of under the .sig tag.
	OCI11 bool
	// Rekor, when set, attaches an offline Rekor bundle that this log
	// signed, entered at LoggedAt (now when zero): the transparency log
	// check then passes without reaching any log.
	Rekor    *Rekor
	LoggedAt time.Time
}

// Rekor stands in for a transparency log: its key signs bundles
// (Signed Entry Timestamps) offline.
type Rekor struct {
	key *ecdsa.PrivateKey
	// PublicPEM is the log's key, as rekor.pubkey holds it.
	PublicPEM string
	// LogID is the hex SHA-256 of the key's PKIX DER.
	LogID string
}

// NewRekor returns a log with a fresh key.
func NewRekor(t T) *Rekor {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return &Rekor{key: key, PublicPEM: string(pub), LogID: KeyID(t, &key.PublicKey)}
}

// bundle is the log's entry for a signature: a hashedrekord v0.0.1 body
// (the payload's SHA-256, the signature, the signer's PEM key or
// certificate) and the log's signature over the canonical JSON of body,
// time, index and log ID, as cosign checks it offline.
func (r *Rekor) bundle(t T, body []byte, b64sig string, signerPEM []byte, at time.Time) *cbundle.RekorBundle {
	t.Helper()
	sum := sha256.Sum256(body)
	entry, err := json.Marshal(map[string]any{"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": map[string]any{
		"data":      map[string]any{"hash": map[string]any{"algorithm": "sha256", "value": hex.EncodeToString(sum[:])}},
		"signature": map[string]any{"content": b64sig, "publicKey": map[string]any{"content": base64.StdEncoding.EncodeToString(signerPEM)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := cbundle.RekorPayload{Body: base64.StdEncoding.EncodeToString(entry), IntegratedTime: at.Unix(), LogIndex: 1, LogID: r.LogID}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	canonical, err := jsoncanonicalizer.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256(canonical)
	set, err := ecdsa.SignASN1(rand.Reader, r.key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	return &cbundle.RekorBundle{SignedEntryTimestamp: set, Payload: p}
}

// Sign signs the image with key and writes the signature to the image's
// .sig tag.
func (r *Registry) Sign(t T, img Image, key signature.Signer, o SignOptions) {
	t.Helper()
	d := mustDigest(t, img.DigestRef)
	claim := d
	if o.ForDigest != "" {
		claim = d.Context().Digest(o.ForDigest)
	}
	body, err := (&payload.Cosign{Image: claim, Annotations: o.Annotations}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := key.SignMessage(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b64sig := base64.StdEncoding.EncodeToString(sig)
	var opts []static.Option
	if o.Cert != nil {
		opts = append(opts, static.WithCertChain(o.Cert, o.Chain))
	}
	if o.Rekor != nil {
		signerPEM := o.Cert
		if signerPEM == nil {
			pub, err := key.PublicKey()
			if err != nil {
				t.Fatal(err)
			}
			if signerPEM, err = cryptoutils.MarshalPublicKeyToPEM(pub); err != nil {
				t.Fatal(err)
			}
		}
		at := o.LoggedAt
		if at.IsZero() {
			at = time.Now()
		}
		opts = append(opts, static.WithBundle(o.Rekor.bundle(t, body, b64sig, signerPEM, at)))
	}
	s, err := static.NewSignature(body, b64sig, opts...)
	if err != nil {
		t.Fatal(err)
	}
	write := func(se oci.SignedEntity) error { return ociremote.WriteSignatures(d.Repository, se) }
	if o.OCI11 {
		write = func(se oci.SignedEntity) error { return ociremote.WriteSignaturesExperimentalOCI(d, se) }
	}
	attach(t, d, func(se oci.SignedEntity) (oci.SignedEntity, error) { return mutate.AttachSignatureToEntity(se, s) }, write)
}

// Unsign deletes the image's .sig tag: the signatures are gone, as when
// a publisher revokes them.
func (r *Registry) Unsign(t T, img Image) {
	t.Helper()
	tag, err := ociremote.SignatureTag(mustDigest(t, img.DigestRef))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Delete(tag); err != nil {
		t.Fatalf("deleting %s: %v", tag, err)
	}
}

// CopySignatures copies the .sig tag of from onto to: a signature about
// from's digest now sits where to's signatures are looked up.
func (r *Registry) CopySignatures(t T, from, to Image) {
	t.Helper()
	src, dst := mustDigest(t, from.DigestRef), mustDigest(t, to.DigestRef)
	srcTag, err := ociremote.SignatureTag(src)
	if err != nil {
		t.Fatal(err)
	}
	dstTag, err := ociremote.SignatureTag(dst)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(srcTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Tag(dstTag, desc); err != nil {
		t.Fatal(err)
	}
}

// Statement is an in-toto statement about the image.
func Statement(img Image, predicateType string, predicate any) map[string]any {
	hexDigest := strings.TrimPrefix(img.Digest, "sha256:")
	return map[string]any{
		"_type":         "https://in-toto.io/Statement/v0.1",
		"subject":       []any{map[string]any{"name": strings.SplitN(img.DigestRef, "@", 2)[0], "digest": map[string]any{"sha256": hexDigest}}},
		"predicateType": predicateType,
		"predicate":     predicate,
	}
}

// Attest signs the statement as a DSSE envelope and writes it to the
// image's .att tag. tamper, when set, edits the envelope's payload after
// signing.
func (r *Registry) Attest(t T, img Image, key signature.Signer, statement map[string]any, tamper func(map[string]any)) {
	t.Helper()
	d := mustDigest(t, img.DigestRef)
	body, err := json.Marshal(statement)
	if err != nil {
		t.Fatal(err)
	}
	env, err := dsse.WrapSigner(key, "application/vnd.in-toto+json").SignMessage(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tamper != nil {
		var e map[string]any
		if err := json.Unmarshal(env, &e); err != nil {
			t.Fatal(err)
		}
		edited := map[string]any{}
		if err := json.Unmarshal(body, &edited); err != nil {
			t.Fatal(err)
		}
		tamper(edited)
		raw, _ := json.Marshal(edited)
		e["payload"] = base64.StdEncoding.EncodeToString(raw)
		if env, err = json.Marshal(e); err != nil {
			t.Fatal(err)
		}
	}
	att, err := static.NewAttestation(env)
	if err != nil {
		t.Fatal(err)
	}
	attach(t, d, func(se oci.SignedEntity) (oci.SignedEntity, error) { return mutate.AttachAttestationToEntity(se, att) },
		func(se oci.SignedEntity) error { return ociremote.WriteAttestations(d.Repository, se) })
}

func attach(t T, d name.Digest, add func(oci.SignedEntity) (oci.SignedEntity, error), write func(oci.SignedEntity) error) {
	t.Helper()
	se, err := ociremote.SignedEntity(d)
	if err != nil {
		t.Fatal(err)
	}
	se, err = add(se)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(se); err != nil {
		t.Fatal(err)
	}
}

func mustDigest(t T, ref string) name.Digest {
	t.Helper()
	d, err := name.NewDigest(ref)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// CA is a local certificate authority standing in for Fulcio.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// RootPEM is the CA certificate, as keyless.roots holds it.
	RootPEM string
}

// NewCA returns a self-signed CA.
func NewCA(t T, cn string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn, Organization: []string{"charter test"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{cert: cert, key: key, RootPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// LoadCA returns the CA of a PEM certificate file and its ECDSA P-256
// key file: a test CA kept in a suite's testdata, whose certificate a
// policy's keyless.roots holds.
func LoadCA(t T, certPath, keyPath string) *CA {
	t.Helper()
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		t.Fatalf("%s: no PEM certificate", certPath)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", certPath, err)
	}
	key := LoadKeyFile(t, keyPath)
	return &CA{cert: cert, key: key.private, RootPEM: string(certPEM)}
}

// Identity is what a keyless leaf certificate says about its signer.
type Identity struct {
	// Email or URI is the SAN.
	Email, URI string
	// Issuer goes to the Fulcio issuer extensions (.1.1 raw, .1.8 DER).
	Issuer string
	// Extensions are more Fulcio v1 extensions by OID, as raw bytes.
	Extensions map[string]string
	// NoCodeSigning leaves out the CodeSigning extended key usage.
	NoCodeSigning bool
	// NotBefore and NotAfter bound the certificate's validity (default:
	// from a minute ago for an hour).
	NotBefore, NotAfter time.Time
	// SCT, when set, is the CT log whose SCT the certificate embeds, as
	// Fulcio's do: what a verifier that does not ignore SCTs wants.
	SCT *Rekor
}

// Leaf issues a short-lived code-signing certificate and returns its key
// and PEM.
func (ca *CA) Leaf(t T, id Identity) (signature.SignerVerifier, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		NotBefore:    time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if !id.NotBefore.IsZero() {
		tmpl.NotBefore = id.NotBefore
	}
	if !id.NotAfter.IsZero() {
		tmpl.NotAfter = id.NotAfter
	}
	if !id.NoCodeSigning {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}
	}
	if id.Email != "" {
		tmpl.EmailAddresses = []string{id.Email}
	}
	if id.URI != "" {
		u, err := url.Parse(id.URI)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = []*url.URL{u}
	}
	ext := func(oid string, value []byte) {
		tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, pkix.Extension{Id: parseOID(t, oid), Value: value})
	}
	if id.Issuer != "" {
		ext("1.3.6.1.4.1.57264.1.1", []byte(id.Issuer))
		v2, err := asn1.MarshalWithParams(id.Issuer, "utf8")
		if err != nil {
			t.Fatal(err)
		}
		ext("1.3.6.1.4.1.57264.1.8", v2)
	}
	for oid, v := range id.Extensions {
		ext(oid, []byte(v))
	}
	var der []byte
	if id.SCT != nil {
		der = ca.withEmbeddedSCT(t, tmpl, &key.PublicKey, id.SCT)
	} else if der, err = x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key); err != nil {
		t.Fatal(err)
	}
	sv, err := signature.LoadECDSASignerVerifier(key, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return sv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func parseOID(t T, s string) asn1.ObjectIdentifier {
	var oid asn1.ObjectIdentifier
	for _, part := range strings.Split(s, ".") {
		n := 0
		for _, c := range part {
			n = n*10 + int(c-'0')
		}
		oid = append(oid, n)
	}
	return oid
}

// KeyID is the hex SHA-256 of a public key's PKIX DER, Rekor's log ID.
func KeyID(t T, pub crypto.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

func discard() *log.Logger { return log.New(io.Discard, "", 0) }

// LoopbackEgress is the egress guard of verifiers in tests: the default
// blocklist with loopback (where this package's registries listen)
// explicitly let through. Image verification refuses loopback otherwise.
func LoopbackEgress() *egress.Guard {
	g, err := egress.New(egress.WithAllowedAddresses([]string{"127.0.0.0/8"}))
	if err != nil {
		panic(err)
	}
	return g
}

// Egress is the egress guard that lets a verifier reach this registry,
// and nothing else the default blocklist refuses.
func (r *Registry) Egress() *egress.Guard {
	g, err := egress.New(egress.WithAllowedAddresses([]string{r.Host}))
	if err != nil {
		panic(err)
	}
	return g
}
