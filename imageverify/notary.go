package imageverify

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/imageverify/notary"
)

// verifyNotary verifies a notary attestor's check (loader.ImageCheck.Type
// Notary) of the image at digest: its Notary signature, or its signed OCI
// 1.1 referrer of type check.PredicateType, through the same registry
// access (credentials, mirror, egress guard) as cosign's checks.
func (v *Verifier) verifyNotary(ctx context.Context, digest name.Digest, check loader.ImageCheck, kind checkKind) (loader.ImageVerified, error) {
	res := loader.ImageVerified{Digest: digest.DigestStr()}
	trust, err := notaryTrust(check)
	if err != nil {
		return res, err
	}
	_, opts, err := v.remoteReference(ctx, check.Image, check.Credentials)
	if err != nil {
		return res, err
	}
	reg := notary.Registry{Options: opts, HTTP: &http.Client{Transport: v.o.Transport, Timeout: v.o.Timeout}}
	if kind == kindSignatures {
		return res, notary.VerifySignature(ctx, digest, trust, reg)
	}
	st, err := notary.VerifyAttestation(ctx, digest, check.PredicateType, trust, reg)
	if err != nil {
		return res, err
	}
	res.Statements = append(res.Statements, st)
	return res, nil
}

// notaryTrust reads the certificates of a notary check: an
// ImageValidatingPolicy attestor's certs (Attestor.Certificates.
// Certificate), or a ClusterPolicy type Notary entry's cert and certChain,
// which Kyverno puts in one CA trust store (§3.5).
func notaryTrust(check loader.ImageCheck) (notary.Trust, error) {
	var trust notary.Trust
	if check.Attestor.Certificates == nil {
		return trust, fmt.Errorf("a notary attestor needs certificates")
	}
	for _, c := range []struct{ field, text string }{{"cert", check.Attestor.Certificates.Certificate}, {"certChain", check.Attestor.Certificates.CertificateChain}} {
		if c.text == "" {
			continue
		}
		certs, err := loader.ParseCertificates(c.text)
		if err != nil {
			return trust, fmt.Errorf("notary %s: %w", c.field, err)
		}
		trust.Certs = append(trust.Certs, certs...)
	}
	if len(trust.Certs) == 0 {
		return trust, fmt.Errorf("a notary attestor needs certificates")
	}
	if check.TSACertificates != "" {
		var err error
		if trust.TSACerts, err = loader.ParseCertificates(check.TSACertificates); err != nil {
			return trust, fmt.Errorf("notary tsaCerts: %w", err)
		}
	}
	return trust, nil
}
