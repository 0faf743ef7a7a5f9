// Package notary verifies Notary Project (notation) signatures of images
// and of their OCI 1.1 referrers, as Kyverno's `notary` attestors do
// (verify-images.md §3.5): the attestor's certificates are a CA trust
// store, its tsaCerts a timestamp authority trust store, under one trust
// policy of level strict for every registry and identity. Signatures are
// verified with notation-go; the registry is read through
// go-containerregistry, with the caller's credentials, transport and
// egress guard, so notation never dials anything of its own but the
// revocation checks (OCSP, CRLs), which take the caller's HTTP client too.
package notary

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/notaryproject/notation-core-go/revocation"
	"github.com/notaryproject/notation-core-go/revocation/purpose"
	"github.com/notaryproject/notation-go"
	notationregistry "github.com/notaryproject/notation-go/registry"
	"github.com/notaryproject/notation-go/verifier"
	"github.com/notaryproject/notation-go/verifier/trustpolicy"
	"github.com/notaryproject/notation-go/verifier/truststore"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	// The two signature envelope formats notation writes.
	_ "github.com/notaryproject/notation-core-go/signature/cose"
	_ "github.com/notaryproject/notation-core-go/signature/jws"

	crlutil "github.com/notaryproject/notation-core-go/revocation/crl"
)

// Limits, as Kyverno's (§3.5) and notation's own.
const (
	// maxSignatureAttempts is how many signatures of one artifact are
	// tried before the verification gives up.
	maxSignatureAttempts = 10
	// maxReferrers is the most referrers of one type an image may have.
	maxReferrers = 50
	// maxManifestBytes bounds a signature or referrer manifest.
	maxManifestBytes = 4 << 20
	// maxSignatureBytes bounds a signature envelope.
	maxSignatureBytes = 32 << 20
	// maxPayloadBytes bounds the one layer of an attestation referrer.
	maxPayloadBytes = 10 << 20
)

// storeName names the trust stores of the one trust policy.
const storeName = "charter"

// Trust is what one notary attestor trusts.
type Trust struct {
	// Certs are the certificates a signing chain must end in: the "ca"
	// trust store.
	Certs []*x509.Certificate
	// TSACerts are the timestamp authorities' roots; when set, signatures
	// must carry a timestamp countersignature they issued.
	TSACerts []*x509.Certificate
}

// Registry is how the verification reaches one image's repository.
type Registry struct {
	// Options carry the credentials, transport and context of every
	// registry request.
	Options []remote.Option
	// HTTP carries the revocation checks (OCSP and CRL downloads named
	// by the certificates); it must be egress guarded as registry
	// requests are.
	HTTP *http.Client
}

// VerifySignature checks that the image (named by digest) carries a
// Notary signature that trust accepts.
func VerifySignature(ctx context.Context, image name.Digest, trust Trust, reg Registry) error {
	v, err := newVerifier(trust, reg.HTTP)
	if err != nil {
		return err
	}
	repo := &repository{repo: image.Context(), opts: reg.Options}
	_, _, err = notation.Verify(ctx, v, repo, notation.VerifyOptions{ArtifactReference: image.String(), MaxSignatureAttempts: maxSignatureAttempts})
	if err != nil {
		return fmt.Errorf("failed to verify image %s: %w", image, err)
	}
	return nil
}

// VerifyAttestation finds the image's OCI 1.1 referrers of artifactType,
// and returns the statement of the first one whose own Notary signature
// trust accepts: the referrer's manifest, with type set to its artifact
// type and predicate to its one layer's JSON, as Kyverno builds it.
func VerifyAttestation(ctx context.Context, image name.Digest, artifactType string, trust Trust, reg Registry) (map[string]any, error) {
	v, err := newVerifier(trust, reg.HTTP)
	if err != nil {
		return nil, err
	}
	repo := &repository{repo: image.Context(), opts: reg.Options}
	referrers, err := repo.referrers(image, artifactType)
	if err != nil {
		return nil, fmt.Errorf("failed to fetch referrers: %w", err)
	}
	if len(referrers) > maxReferrers {
		return nil, fmt.Errorf("failed to fetch referrers: too many referrers found, max limit is %d", maxReferrers)
	}
	var errs []error
	for _, d := range referrers {
		ref := image.Context().Digest(d.Digest.String())
		if _, _, err := notation.Verify(ctx, v, repo, notation.VerifyOptions{ArtifactReference: ref.String(), MaxSignatureAttempts: maxSignatureAttempts}); err != nil {
			errs = append(errs, fmt.Errorf("referrer %s: %w", d.Digest, err))
			continue
		}
		st, err := repo.statement(ref, d, artifactType)
		if err != nil {
			errs = append(errs, fmt.Errorf("referrer %s: %w", d.Digest, err))
			continue
		}
		return st, nil
	}
	return nil, errors.Join(append([]error{fmt.Errorf("no matching attestations found for image %s with type %s", image, artifactType)}, errs...)...)
}

// newVerifier is notation's verifier for one attestor: one trust policy,
// strict, for every registry and signer identity.
func newVerifier(trust Trust, client *http.Client) (notation.Verifier, error) {
	if len(trust.Certs) == 0 {
		return nil, errors.New("a notary attestor needs certificates")
	}
	if client == nil {
		return nil, errors.New("no HTTP client for revocation checks")
	}
	stores := []string{string(truststore.TypeCA) + ":" + storeName}
	if len(trust.TSACerts) > 0 {
		stores = append(stores, string(truststore.TypeTSA)+":"+storeName)
	}
	policy := &trustpolicy.Document{Version: "1.0", TrustPolicies: []trustpolicy.TrustPolicy{{
		Name: storeName, RegistryScopes: []string{"*"},
		SignatureVerification: trustpolicy.SignatureVerification{VerificationLevel: trustpolicy.LevelStrict.Name},
		TrustStores:           stores, TrustedIdentities: []string{"*"},
	}}}
	crls, err := crlutil.NewHTTPFetcher(client)
	if err != nil {
		return nil, err
	}
	codeSigning, err := revocation.NewWithOptions(revocation.Options{OCSPHTTPClient: client, CRLFetcher: crls, CertChainPurpose: purpose.CodeSigning})
	if err != nil {
		return nil, err
	}
	timestamping, err := revocation.NewWithOptions(revocation.Options{OCSPHTTPClient: client, CRLFetcher: crls, CertChainPurpose: purpose.Timestamping})
	if err != nil {
		return nil, err
	}
	return verifier.NewWithOptions(policy, trustStore(trust), nil, verifier.VerifierOptions{
		RevocationCodeSigningValidator: codeSigning, RevocationTimestampingValidator: timestamping})
}

// trustStore serves the attestor's certificates as notation's named
// stores.
type trustStore Trust

func (t trustStore) GetCertificates(_ context.Context, typ truststore.Type, named string) ([]*x509.Certificate, error) {
	if named != storeName {
		return nil, fmt.Errorf("unknown trust store %s:%s", typ, named)
	}
	switch typ {
	case truststore.TypeCA:
		return t.Certs, nil
	case truststore.TypeTSA:
		return t.TSACerts, nil
	}
	return nil, fmt.Errorf("no %s trust store", typ)
}

// repository is notation's view of an image repository, read through
// go-containerregistry: charter only reads signatures, never pushes one.
type repository struct {
	repo name.Repository
	opts []remote.Option
}

var _ notationregistry.Repository = (*repository)(nil)

func (r *repository) Resolve(_ context.Context, reference string) (ocispec.Descriptor, error) {
	var ref name.Reference = r.repo.Tag(reference)
	if _, err := digest.Parse(reference); err == nil {
		ref = r.repo.Digest(reference)
	}
	d, err := remote.Head(ref, r.opts...)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	return ociDescriptor(*d), nil
}

func (r *repository) ListSignatures(_ context.Context, desc ocispec.Descriptor, fn func([]ocispec.Descriptor) error) error {
	list, err := r.referrers(r.repo.Digest(desc.Digest.String()), notationregistry.ArtifactTypeNotation)
	if err != nil {
		return err
	}
	return fn(list)
}

// referrers lists the referrers of d of one artifact type (the
// registry's referrers API, else the tag schema go-containerregistry
// falls back to).
func (r *repository) referrers(d name.Digest, artifactType string) ([]ocispec.Descriptor, error) {
	idx, err := remote.Referrers(d, append(r.opts, remote.WithFilter("artifactType", artifactType))...)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []ocispec.Descriptor
	for _, desc := range m.Manifests {
		if desc.ArtifactType == artifactType {
			out = append(out, ociDescriptor(desc))
		}
	}
	return out, nil
}

func (r *repository) FetchSignatureBlob(_ context.Context, desc ocispec.Descriptor) ([]byte, ocispec.Descriptor, error) {
	m, err := r.manifest(r.repo.Digest(desc.Digest.String()), desc)
	if err != nil {
		return nil, ocispec.Descriptor{}, err
	}
	if len(m.Layers) != 1 {
		return nil, ocispec.Descriptor{}, fmt.Errorf("signature manifest requires exactly one signature envelope blob, got %d", len(m.Layers))
	}
	blob, err := r.blob(m.Layers[0], maxSignatureBytes)
	if err != nil {
		return nil, ocispec.Descriptor{}, err
	}
	return blob, m.Layers[0], nil
}

func (r *repository) PushSignature(context.Context, string, []byte, ocispec.Descriptor, map[string]string) (ocispec.Descriptor, ocispec.Descriptor, error) {
	return ocispec.Descriptor{}, ocispec.Descriptor{}, errors.New("charter verifies signatures and never pushes one")
}

// manifest fetches an OCI image manifest, at most maxManifestBytes.
func (r *repository) manifest(ref name.Digest, desc ocispec.Descriptor) (*ocispec.Manifest, error) {
	if desc.Size > maxManifestBytes {
		return nil, fmt.Errorf("manifest %s too large: %d bytes", desc.Digest, desc.Size)
	}
	got, err := remote.Get(ref, r.opts...)
	if err != nil {
		return nil, err
	}
	if len(got.Manifest) > maxManifestBytes {
		return nil, fmt.Errorf("manifest %s too large: %d bytes", desc.Digest, len(got.Manifest))
	}
	if got.MediaType != ocispec.MediaTypeImageManifest {
		return nil, fmt.Errorf("manifest %s is a %s, not an OCI image manifest", desc.Digest, got.MediaType)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(got.Manifest, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", desc.Digest, err)
	}
	return &m, nil
}

// blob fetches a blob of at most limit bytes; go-containerregistry
// checks its digest as it reads.
func (r *repository) blob(desc ocispec.Descriptor, limit int64) ([]byte, error) {
	if desc.Size > limit {
		return nil, fmt.Errorf("blob %s too large: %d bytes, at most %d", desc.Digest, desc.Size, limit)
	}
	l, err := remote.Layer(r.repo.Digest(desc.Digest.String()), r.opts...)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("blob %s larger than %d bytes", desc.Digest, limit)
	}
	return data, nil
}

// statement is Kyverno's payload of a verified referrer: its manifest,
// type (the artifact type) and predicate (its one layer, JSON).
func (r *repository) statement(ref name.Digest, desc ocispec.Descriptor, artifactType string) (map[string]any, error) {
	m, err := r.manifest(ref, desc)
	if err != nil {
		return nil, err
	}
	if len(m.Layers) != 1 {
		return nil, fmt.Errorf("an attestation must have exactly one layer, got %d", len(m.Layers))
	}
	layer, err := r.blob(m.Layers[0], maxPayloadBytes)
	if err != nil {
		return nil, err
	}
	var predicate any
	if err := json.Unmarshal(layer, &predicate); err != nil {
		return nil, fmt.Errorf("the attestation's layer is not JSON: %w", err)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	st := map[string]any{}
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, err
	}
	st["type"] = artifactType
	st["predicate"] = predicate
	return st, nil
}

func ociDescriptor(d v1.Descriptor) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: string(d.MediaType), Digest: digest.Digest(d.Digest.String()), Size: d.Size,
		Annotations: d.Annotations, ArtifactType: d.ArtifactType}
}
