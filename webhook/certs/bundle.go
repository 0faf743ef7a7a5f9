package certs

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"time"
)

// The CA bundle the webhooks carry must trust, at every moment, the
// certificate every replica serves. Two facts make that hard: replicas
// switch to a new serving certificate a little after the TLS Secret
// changes (their informers), and the API server trusts a new caBundle a
// little after the webhook configurations change (its informers). So a
// rotation runs in this order (Renewer.Reconcile):
//
//  1. the CA Secret's bundle gains the new CA and keeps every CA that may
//     still sign a served certificate, including ones recovered from the
//     TLS Secret's ca.crt and the published caBundles when the CA Secret
//     itself was deleted;
//  2. that bundle is published to the webhook configurations;
//  3. PropagationDelay after the API server was seen to trust the new CA,
//     the serving certificate signed by it is written;
//  4. TrimGrace after that certificate was issued, when no replica can
//     serve an older one, the bundle drops every other CA.

// PlanBundle returns the CAs the bundle must hold, oldest first and
// signer last, and when the others may be dropped (zero when no drop is
// pending). known are every CA certificate still found anywhere (the CA
// Secret, the TLS Secret's ca.crt, the published caBundles); served is
// the serving certificate the TLS Secret holds, nil when it is gone (the
// replicas then still serve the last one they read, signed by who knows
// which of known).
//
// Expired CAs are dropped at once: they verify nothing. The others stay
// until served is signed by signer and was issued grace ago.
func PlanBundle(signer *x509.Certificate, known []*x509.Certificate, served *x509.Certificate, now time.Time, grace time.Duration) (bundle []*x509.Certificate, trimAt time.Time) {
	var others []*x509.Certificate
	for _, c := range known {
		if c == nil || c.Equal(signer) || !now.Before(c.NotAfter) ||
			slices.ContainsFunc(others, c.Equal) {
			continue
		}
		others = append(others, c)
	}
	slices.SortStableFunc(others, func(a, b *x509.Certificate) int { return a.NotAfter.Compare(b.NotAfter) })
	bundle = append(others, signer)
	if len(others) == 0 || served == nil || served.CheckSignatureFrom(signer) != nil {
		return bundle, time.Time{}
	}
	trimAt = issuedAt(served).Add(grace)
	if now.Before(trimAt) {
		return bundle, trimAt
	}
	return []*x509.Certificate{signer}, time.Time{}
}

// issuedAt is when charter issued c: certificates are backdated.
func issuedAt(c *x509.Certificate) time.Time { return c.NotBefore.Add(backdate) }

// EncodeBundle writes the certificates as one PEM bundle.
func EncodeBundle(cs []*x509.Certificate) []byte {
	var out bytes.Buffer
	for _, c := range cs {
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return out.Bytes()
}

// parseBundle parses what it can of a PEM bundle: a missing or corrupt
// bundle holds no CA.
func parseBundle(data []byte) []*x509.Certificate {
	cs, err := ParseCertificates(data)
	if err != nil {
		return nil
	}
	return cs
}

// SigningCA returns the newest CA of the bundle whose public key is key's,
// nil when none is.
func SigningCA(bundle []*x509.Certificate, key crypto.Signer) *x509.Certificate {
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok {
		return nil
	}
	var best *x509.Certificate
	for _, c := range bundle {
		if c.IsCA && pub.Equal(c.PublicKey) && (best == nil || c.NotAfter.After(best.NotAfter)) {
			best = c
		}
	}
	return best
}

// Trusts reports whether every bundle holds ca; no bundle at all (no
// webhook configuration yet) trusts anything, since nothing calls.
func Trusts(bundles [][]byte, ca *x509.Certificate) bool {
	for _, b := range bundles {
		if !slices.ContainsFunc(parseBundle(b), ca.Equal) {
			return false
		}
	}
	return true
}
