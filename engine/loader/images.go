package loader

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/fault"
	"github.com/charter-dev/charter/engine/variables"
)

// ImageVerifier checks the signatures and attestations of container
// images for verifyImages rules. The engine does no I/O: it decides which
// images a rule covers, what each attestor must accept and how results
// count (m of n, conditions on predicates, digests to pin), and asks the
// verifier one question per image and attestor entry. imageverify/ is the
// cosign-backed implementation, with the registry client and the cache.
type ImageVerifier interface {
	// VerifySignatures checks that the image carries a signature that the
	// check's attestor accepts, and returns the digest it verified.
	VerifySignatures(ctx context.Context, check ImageCheck) (ImageVerified, error)
	// VerifyAttestations returns the in-toto statements signed for the
	// image that the attestor accepts (every predicate type; the engine
	// filters by check.PredicateType), and the digest they are about.
	VerifyAttestations(ctx context.Context, check ImageCheck) (ImageVerified, error)
	// ResolveDigest returns the digest the reference points to now.
	ResolveDigest(ctx context.Context, image string, creds ImageCredentials) (string, error)
}

// ImageCheck is one question to an ImageVerifier: does this attestor
// accept this image?
type ImageCheck struct {
	// Image is the normalised reference: registry/path:tag, or
	// registry/path@digest when the resource names a digest.
	Image string
	// Attestor is one attestor entry after variable substitution: keys
	// hold a single PEM key, and a nested attestor set is never passed.
	Attestor kyvernov1.Attestor
	// Repository holds the signatures instead of the image's own
	// repository, when set.
	Repository string
	// CosignOCI11 looks for signatures among OCI 1.1 referrers first.
	CosignOCI11 bool
	// PredicateType is the attestation type asked for (attestations only).
	PredicateType string
	// Credentials say how to reach the registry.
	Credentials ImageCredentials
	// UseCache allows a cached result for the same digest and check.
	UseCache bool
	// VerifiedSince, when set, allows only a cached result verified at or
	// after it.
	VerifiedSince time.Time
	// Scope names the policy and rule asking ("<policy key>/<rule>"); a
	// cached result answers only the same scope.
	Scope string
	// Type is the verifier the attestor names: "" (or Cosign) for cosign,
	// Notary for an ImageValidatingPolicy's notary attestor or a
	// ClusterPolicy's type Notary entry, whose trusted certificates are
	// Attestor.Certificates (PEM: Certificate and CertificateChain) and
	// whose attestations are OCI 1.1 referrers of type PredicateType.
	Type kyvernov1.ImageVerificationType
	// TSACertificates are a notary attestor's timestamp authority roots
	// (PEM); when set, signatures must carry a timestamp they issued.
	TSACertificates string
}

// ParseCertificates reads every PEM certificate of text; text with none,
// or with a block that is no certificate, is an error.
func ParseCertificates(text string) ([]*x509.Certificate, error) {
	rest := bytes.TrimSpace([]byte(text))
	var out []*x509.Certificate
	for len(rest) > 0 {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("not PEM certificates")
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a PEM %q block where certificates belong", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("invalid certificate: %w", err)
		}
		out = append(out, c)
		rest = bytes.TrimSpace(rest)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

// ImageCredentials are the registry credentials of one check: the Pod's
// imagePullSecrets (in Namespace) and the entry's imageRegistryCredentials.
type ImageCredentials struct {
	Namespace   string
	PullSecrets []string
	Registry    *kyvernov1.ImageRegistryCredentials
	// Scope is the namespace of the namespaced policy asking, "" for a
	// cluster-wide one. Registry secrets are read with charter's
	// identity, so a namespaced policy may name only its own
	// namespace's (CheckSecretScope).
	Scope string
}

// CheckSecretScope refuses a registry secret ("name", in namespace, or
// "namespace/name") outside scope, the namespace of the namespaced policy
// naming it ("" for a cluster-wide policy, which may name any).
func CheckSecretScope(scope, namespace, secret string) error {
	ns, name, ok := strings.Cut(secret, "/")
	if !ok {
		ns, name = namespace, secret
	}
	if scope == "" || ns == scope {
		return nil
	}
	return fmt.Errorf("a namespaced policy can only use registry secrets of its own namespace %q, not %s/%s", scope, ns, name)
}

// CheckSecretsScope adds a fault at path[i] for each registry secret of a
// policy's list outside scope (CheckSecretScope, in scope's namespace); a
// name with variables is checked when evaluated.
func CheckSecretsScope(scope string, secrets []string, path string, f *fault.Collector) {
	for i, s := range secrets {
		if variables.HasVariables(s) {
			continue
		}
		if err := CheckSecretScope(scope, scope, s); err != nil {
			f.Add(fmt.Sprintf("%s[%d]", path, i), err.Error())
		}
	}
}

// RegistryProviderFault says why a registry credential provider cannot be
// used: charter builds in default and github only (imageverify links no
// cloud credential helpers); "" for those.
func RegistryProviderFault(p string) string {
	switch strings.ToLower(p) {
	case "default", "github":
		return ""
	}
	return fmt.Sprintf("registry credential provider %q is not built into charter (default and github are); use secrets", p)
}

// ValidSignatureAlgorithm reports whether a key's signature (hash)
// algorithm is one the verifier knows; "" is its default.
func ValidSignatureAlgorithm(a string) bool {
	switch a {
	case "", "sha224", "sha256", "sha384", "sha512":
		return true
	}
	return false
}

// ImageVerified is what an ImageVerifier accepted.
type ImageVerified struct {
	// Digest is the image digest the signatures or statements are about.
	Digest string
	// Statements are the verified in-toto statements (attestations only):
	// maps with _type, subject, predicateType and predicate.
	Statements []map[string]any
	// Cached reports a result served from the cache.
	Cached bool
}

// ImageUnavailableError says the verification could not run: the registry
// could not be reached or answered with an error that is no verdict on
// the image (5xx, 429, timeout). The rule ends in error, not fail, so
// failurePolicy decides, unless the rule requires verified images.
type ImageUnavailableError struct {
	Err error
}

func (e *ImageUnavailableError) Error() string { return e.Err.Error() }
func (e *ImageUnavailableError) Unwrap() error { return e.Err }

// IsImageUnavailable reports whether err says a verification could not
// run.
func IsImageUnavailable(err error) bool {
	var u *ImageUnavailableError
	return errors.As(err, &u) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// certExtensionOIDs name Fulcio's certificate extensions by the keys
// additionalExtensions accepts (verify-images.md §3.3).
var certExtensionOIDs = map[string]string{
	"oidcIssuer":               "1.3.6.1.4.1.57264.1.1",
	"githubWorkflowTrigger":    "1.3.6.1.4.1.57264.1.2",
	"githubWorkflowSha":        "1.3.6.1.4.1.57264.1.3",
	"githubWorkflowName":       "1.3.6.1.4.1.57264.1.4",
	"githubWorkflowRepository": "1.3.6.1.4.1.57264.1.5",
	"githubWorkflowRef":        "1.3.6.1.4.1.57264.1.6",
}

// CertExtensionOID returns the OID an additionalExtensions key names: one
// of the names below or the OID itself.
func CertExtensionOID(key string) (string, bool) {
	if oid, ok := certExtensionOIDs[key]; ok {
		return oid, true
	}
	for _, oid := range certExtensionOIDs {
		if oid == key {
			return oid, true
		}
	}
	return "", false
}
