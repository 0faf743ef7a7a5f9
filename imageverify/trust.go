package imageverify

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/cosign/v2/pkg/oci"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/tuf"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/engine/wildcard"
)

// DefaultRekorURL is the transparency log used when an attestor names
// none; the tlog check is on unless rekor.ignoreTlog is set.
const DefaultRekorURL = "https://rekor.sigstore.dev"

// identity is what a keyless attestor requires of a signer's certificate
// beyond its chain: Kyverno's subject, issuer and extension matching
// (§3.3), applied to the signatures cosign verified.
type identity struct {
	subject, issuer             string
	subjectRegexp, issuerRegexp *regexp.Regexp
	extensions                  map[string]string // OID → wildcard
	// codeSigning requires the CodeSigning extended key usage in the
	// leaf: Go's chain check accepts a leaf without any EKU for every
	// usage.
	codeSigning bool
}

// checkOpts turns one attestor into cosign's CheckOpts (§3.1).
func (v *Verifier) checkOpts(ctx context.Context, check loader.ImageCheck, kind checkKind) (*cosign.CheckOpts, *identity, *logReach, error) {
	a := &check.Attestor
	co := &cosign.CheckOpts{ExperimentalOCI11: check.CosignOCI11 && kind == kindSignatures}
	var rekor *kyvernov1.Rekor
	var ctlog *kyvernov1.CTLog
	id := &identity{}
	switch {
	case a.Keys != nil:
		rekor, ctlog = a.Keys.Rekor, a.Keys.CTLog
		hash, err := hashAlgorithm(a.Keys.SignatureAlgorithm)
		if err != nil {
			return nil, nil, nil, err
		}
		if a.Keys.PublicKeys == "" {
			return nil, nil, nil, errors.New("a PEM public key is required")
		}
		pk, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(a.Keys.PublicKeys))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("failed to load public key: %w", err)
		}
		if co.SigVerifier, err = signature.LoadVerifier(pk, hash); err != nil {
			return nil, nil, nil, fmt.Errorf("failed to load public key: %w", err)
		}
	case a.Certificates != nil:
		rekor, ctlog = a.Certificates.Rekor, a.Certificates.CTLog
		chain, err := loadCerts(a.Certificates.CertificateChain)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("failed to load certificate chain: %w", err)
		}
		if a.Certificates.Certificate != "" {
			certs, err := loadCerts(a.Certificates.Certificate)
			if err != nil || len(certs) == 0 {
				return nil, nil, nil, fmt.Errorf("failed to load certificate: %v", err)
			}
			if len(chain) > 11 {
				return nil, nil, nil, fmt.Errorf("certificate chain too long (%d), maximum allowed is 11", len(chain))
			}
			if len(chain) > 0 {
				// cosign checks the certificate's SCT here: the CT log
				// keys must be set (and ignoreSCT heeded) before, or it
				// fetches them itself, past the egress guard.
				if err := v.ctLog(ctx, co, a.Certificates.CTLog); err != nil {
					return nil, nil, nil, err
				}
				co.SigVerifier, err = cosign.ValidateAndUnpackCertWithChain(certs[0], chain, co)
			} else {
				co.SigVerifier, err = signature.LoadVerifier(certs[0].PublicKey, crypto.SHA256)
			}
			if err != nil {
				return nil, nil, nil, fmt.Errorf("failed to load certificate: %w", err)
			}
		} else {
			co.RootCerts, co.IntermediateCerts = certPools(chain)
			id.codeSigning = true
		}
	case a.Keyless != nil:
		k := a.Keyless
		rekor, ctlog = k.Rekor, k.CTLog
		var roots []*x509.Certificate
		var err error
		if k.Roots == "" {
			// Kyverno's default: the public-good Fulcio CA, whose roots
			// come from Sigstore's TUF repository.
			if roots, err = v.o.FulcioRoots(ctx); err != nil {
				return nil, nil, nil, &loader.ImageUnavailableError{Err: fmt.Errorf("failed to get the Fulcio roots: %w", err)}
			}
		} else if roots, err = loadCerts(k.Roots); err != nil || len(roots) == 0 {
			return nil, nil, nil, fmt.Errorf("failed to load roots: %v", err)
		}
		co.RootCerts, co.IntermediateCerts = certPools(roots)
		id.codeSigning = true
		id.subject, id.issuer = k.Subject, k.Issuer
		if k.SubjectRegExp != "" {
			if id.subjectRegexp, err = regexp.Compile(k.SubjectRegExp); err != nil {
				return nil, nil, nil, fmt.Errorf("invalid subjectRegExp: %w", err)
			}
		}
		if k.IssuerRegExp != "" {
			if id.issuerRegexp, err = regexp.Compile(k.IssuerRegExp); err != nil {
				return nil, nil, nil, fmt.Errorf("invalid issuerRegExp: %w", err)
			}
		}
		for key, want := range k.AdditionalExtensions {
			oid, ok := loader.CertExtensionOID(key)
			if !ok {
				return nil, nil, nil, fmt.Errorf("invalid certificate extension %s", key)
			}
			if id.extensions == nil {
				id.extensions = map[string]string{}
			}
			id.extensions[oid] = want
		}
	default:
		return nil, nil, nil, errors.New("keys, certificates, keyless, or a nested attestor is required")
	}
	reach, err := v.transparency(ctx, co, rekor, ctlog)
	if err != nil {
		return nil, nil, nil, err
	}
	return co, id, reach, nil
}

// transparency sets the Rekor and CT log checks: on by default, with the
// policy's keys when it gives them, else the public-good keys from TUF.
// The returned logReach (nil when the log is not asked) says whether the
// log could be reached.
func (v *Verifier) transparency(ctx context.Context, co *cosign.CheckOpts, rekor *kyvernov1.Rekor, ctlog *kyvernov1.CTLog) (*logReach, error) {
	var reach *logReach
	url := DefaultRekorURL
	if rekor != nil {
		co.IgnoreTlog = rekor.IgnoreTlog
		if rekor.URL != "" {
			url = rekor.URL
		}
	}
	if !co.IgnoreTlog {
		pem := ""
		if rekor != nil {
			pem = rekor.RekorPubKey
		}
		keys, err := logKeys(ctx, "Rekor", pem, v.o.PublicTrust.RekorPubs)
		if err != nil {
			return nil, err
		}
		co.RekorPubKeys = keys
		client, r, err := rekorClient(url, v.o.Transport)
		if err != nil {
			return nil, fmt.Errorf("invalid rekor URL %q: %w", url, err)
		}
		co.RekorClient, reach = client, r
	}
	if co.SigVerifier == nil {
		if err := v.ctLog(ctx, co, ctlog); err != nil {
			return nil, err
		}
	}
	return reach, nil
}

// ctLog sets the CT log check of certificates: on by default, with the
// policy's key when it gives one, else the public-good keys.
func (v *Verifier) ctLog(ctx context.Context, co *cosign.CheckOpts, ctlog *kyvernov1.CTLog) error {
	pem := ""
	if ctlog != nil {
		co.IgnoreSCT, pem = ctlog.IgnoreSCT, ctlog.CTLogPubKey
	}
	if co.IgnoreSCT || co.CTLogPubKeys != nil {
		return nil
	}
	keys, err := logKeys(ctx, "CT log", pem, v.o.PublicTrust.CTLogPubs)
	if err != nil {
		return err
	}
	co.CTLogPubKeys = keys
	return nil
}

// logKeys returns the policy's key of a transparency log, or the
// public-good keys (PublicTrust) when it gives none.
func logKeys(ctx context.Context, log, pem string, public func(context.Context) (*cosign.TrustedTransparencyLogPubKeys, error)) (*cosign.TrustedTransparencyLogPubKeys, error) {
	if pem == "" {
		keys, err := public(ctx)
		if err != nil {
			return nil, &loader.ImageUnavailableError{Err: fmt.Errorf("failed to get %s public keys: %w", log, err)}
		}
		return keys, nil
	}
	keys := cosign.NewTrustedTransparencyLogPubKeys()
	if err := keys.AddTransparencyLogPubKey([]byte(pem), tuf.Active); err != nil {
		return nil, fmt.Errorf("invalid %s public key: %w", log, err)
	}
	return &keys, nil
}

func hashAlgorithm(name string) (crypto.Hash, error) {
	switch name {
	case "", "sha256":
		return crypto.SHA256, nil
	case "sha224":
		return crypto.SHA224, nil
	case "sha384":
		return crypto.SHA384, nil
	case "sha512":
		return crypto.SHA512, nil
	}
	return 0, fmt.Errorf("invalid signature algorithm %q", name)
}

// loadCerts reads PEM certificates, also when base64-wrapped.
func loadCerts(text string) ([]*x509.Certificate, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, nil
	}
	if !strings.HasPrefix(text, "-----") {
		if raw, err := base64.StdEncoding.DecodeString(text); err == nil {
			text = string(raw)
		}
	}
	return cryptoutils.UnmarshalCertificatesFromPEM([]byte(text))
}

// certPools splits certificates into self-signed roots and
// intermediates.
func certPools(certs []*x509.Certificate) (*x509.CertPool, *x509.CertPool) {
	roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
	hasIntermediate := false
	for _, c := range certs {
		if c.CheckSignatureFrom(c) == nil {
			roots.AddCert(c)
		} else {
			intermediates.AddCert(c)
			hasIntermediate = true
		}
	}
	if !hasIntermediate {
		intermediates = nil
	}
	return roots, intermediates
}

// fulcioIssuerOID holds the OIDC issuer in Fulcio certificates (v1, raw
// bytes); Kyverno reads the issuer from it only.
const fulcioIssuerOID = "1.3.6.1.4.1.57264.1.1"

func (id *identity) required() bool {
	return id.codeSigning || id.subject != "" || id.issuer != "" || id.subjectRegexp != nil || id.issuerRegexp != nil || len(id.extensions) > 0
}

// accept passes when one verified signature's certificate satisfies the
// identity, and reports the first signature's mismatch otherwise.
func (id *identity) accept(sigs []oci.Signature) error {
	if !id.required() {
		return nil
	}
	var first error
	for _, s := range sigs {
		err := id.accept1(s)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func (id *identity) accept1(sig oci.Signature) error {
	if !id.required() {
		return nil
	}
	cert, err := sig.Cert()
	if err != nil {
		return err
	}
	if cert == nil {
		return errors.New("certificate not found")
	}
	if id.codeSigning && !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageCodeSigning) {
		return errors.New("no matching signatures: certificate has no CodeSigning extended key usage")
	}
	if id.subject != "" || id.subjectRegexp != nil {
		sans := cryptoutils.GetSubjectAlternateNames(cert)
		if len(sans) > 0 {
			ok := false
			for _, san := range sans {
				if (id.subject != "" && wildcard.Match(id.subject, san)) || (id.subjectRegexp != nil && id.subjectRegexp.MatchString(san)) {
					ok = true
					break
				}
			}
			if !ok {
				want := id.subject
				if want == "" {
					want = id.subjectRegexp.String()
				}
				return fmt.Errorf("subject mismatch: expected %s, received %s", want, strings.Join(sans, ", "))
			}
		}
	}
	issuer := extensionValue(cert, fulcioIssuerOID)
	if id.issuer != "" && !wildcard.Match(id.issuer, issuer) {
		return fmt.Errorf("issuer mismatch: expected %s, received %s", id.issuer, issuer)
	}
	if id.issuerRegexp != nil && !id.issuerRegexp.MatchString(issuer) {
		return fmt.Errorf("issuer mismatch: expected %s, received %s", id.issuerRegexp, issuer)
	}
	for oid, want := range id.extensions {
		got := extensionValue(cert, oid)
		if !wildcard.Match(want, got) {
			return fmt.Errorf("extension mismatch: expected %s for key %s, received %s", want, oid, got)
		}
	}
	return nil
}

// extensionValue reads a Fulcio v1 extension: the raw bytes of the value.
func extensionValue(cert *x509.Certificate, oid string) string {
	for _, e := range cert.Extensions {
		if e.Id.String() == oid {
			return string(e.Value)
		}
	}
	return ""
}

// matchAnnotations passes when some verified signature's payload holds
// every wanted annotation in its optional section.
func matchAnnotations(sigs []oci.Signature, want map[string]string) error {
	if len(want) == 0 {
		return nil
	}
	for _, s := range sigs {
		p, err := s.Payload()
		if err != nil {
			continue
		}
		var body struct {
			Optional map[string]any `json:"optional"`
		}
		if json.Unmarshal(p, &body) != nil {
			continue
		}
		ok := true
		for k, v := range want {
			if got, found := body.Optional[k]; !found || fmt.Sprint(got) != v {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
	}
	return errors.New("no signature matched the required annotations")
}

// decodeStatement unpacks the in-toto statement of a verified DSSE
// attestation. The generic cosign predicate carries its data as a
// string; JSON data is decoded so conditions can reach into it.
func decodeStatement(att oci.Signature) (map[string]any, error) {
	p, err := att.Payload()
	if err != nil {
		return nil, err
	}
	var env struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(p, &env); err != nil {
		return nil, fmt.Errorf("failed to decode attestation envelope: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		return nil, fmt.Errorf("failed to decode attestation payload: %w", err)
	}
	var st map[string]any
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("failed to decode in-toto statement: %w", err)
	}
	st["type"] = st["predicateType"]
	if st["predicateType"] == "https://cosign.sigstore.dev/attestation/v1" {
		if pred, ok := st["predicate"].(map[string]any); ok {
			if data, ok := pred["Data"].(string); ok {
				var parsed any
				if json.Unmarshal([]byte(data), &parsed) == nil {
					pred = cloneMap(pred)
					pred["Data"] = parsed
					st["predicate"] = pred
				}
			}
		}
	}
	return st, nil
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
