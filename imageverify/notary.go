package imageverify

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/charter-dev/charter/engine"
	"github.com/charter-dev/charter/internal/notary"
)

// verifyNotary verifies a notary attestor's check (engine.ImageCheck.Type
// Notary) of the image at digest: its Notary signature, or its signed OCI
// 1.1 referrer of type check.PredicateType, through the same registry
// access (credentials, mirror, egress guard) as cosign's checks.
func (v *Verifier) verifyNotary(ctx context.Context, digest name.Digest, check engine.ImageCheck, kind checkKind) (engine.ImageVerified, error) {
	res := engine.ImageVerified{Digest: digest.DigestStr()}
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

// notaryTrust reads the certificates of a notary attestor's check.
func notaryTrust(check engine.ImageCheck) (notary.Trust, error) {
	var trust notary.Trust
	if check.Attestor.Certificates == nil {
		return trust, fmt.Errorf("a notary attestor needs certificates")
	}
	certs, err := engine.ParseCertificates(check.Attestor.Certificates.Certificate)
	if err != nil {
		return trust, fmt.Errorf("notary certs: %w", err)
	}
	trust.Certs = certs
	if check.TSACertificates != "" {
		if trust.TSACerts, err = engine.ParseCertificates(check.TSACertificates); err != nil {
			return trust, fmt.Errorf("notary tsaCerts: %w", err)
		}
	}
	return trust, nil
}
