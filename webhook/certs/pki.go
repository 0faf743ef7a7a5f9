// Package certs issues and rotates the admission server's certificates: a
// self-signed CA and a serving certificate signed by it, kept in two
// kubernetes.io/tls Secrets. The leader renews them well before expiry
// (Renewer); every replica serves whatever the TLS Secret holds now
// (SecretKeyPair), so a rotation needs no restart; the CA bundle the
// webhook configurations carry is the CA Secret's tls.crt, which keeps
// older CAs while they may still sign a served certificate (bundle.go).
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Lifetimes, as Kyverno's (admission-reports.md §2.7).
const (
	CAValidity      = 365 * 24 * time.Hour
	ServingValidity = 150 * 24 * time.Hour
	RenewBefore     = 15 * 24 * time.Hour
	// backdate covers clock skew between replicas and the API server.
	backdate = time.Hour
)

// KeyPair is a certificate and its private key, both PEM.
type KeyPair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// Certificates parses every certificate of the PEM bundle.
func (k KeyPair) Certificates() ([]*x509.Certificate, error) { return ParseCertificates(k.CertPEM) }

// ParseCertificates parses every CERTIFICATE block of a PEM bundle.
func ParseCertificates(bundle []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := bundle
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no certificate in PEM data")
	}
	return out, nil
}

func parseKey(keyPEM []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no private key in PEM data")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("private key of type %T cannot sign", key)
	}
	return signer, nil
}

func newKey() (crypto.Signer, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// NewCA issues a self-signed CA named for the namespace. When key is not
// nil (a renewal), the existing key is reused, as Kyverno does, so that
// serving certificates already issued keep verifying during the overlap.
func NewCA(namespace string, key []byte, now time.Time) (KeyPair, error) {
	var signer crypto.Signer
	var keyPEM []byte
	var err error
	if key != nil {
		if signer, err = parseKey(key); err != nil {
			return KeyPair{}, err
		}
		keyPEM = key
	} else if signer, keyPEM, err = newKey(); err != nil {
		return KeyPair{}, err
	}
	sn, err := serial()
	if err != nil {
		return KeyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "*." + namespace + ".svc"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, signer.Public(), signer)
	if err != nil {
		return KeyPair{}, fmt.Errorf("issuing CA: %w", err)
	}
	return KeyPair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

// Serving describes the serving certificate's names.
type Serving struct {
	// Service and Namespace give the SANs <svc>, <svc>.<ns>, <svc>.<ns>.svc.
	Service, Namespace string
	// Hosts are extra SANs: IP addresses or DNS names (out of cluster, the
	// host of --webhook-url).
	Hosts []string
}

// NewServing issues a serving certificate signed by the newest CA of the
// bundle ca (whose key is ca.KeyPEM).
func NewServing(ca KeyPair, s Serving, now time.Time) (KeyPair, error) {
	cas, err := ca.Certificates()
	if err != nil {
		return KeyPair{}, fmt.Errorf("CA: %w", err)
	}
	caCert := newest(cas)
	caKey, err := parseKey(ca.KeyPEM)
	if err != nil {
		return KeyPair{}, fmt.Errorf("CA: %w", err)
	}
	signer, keyPEM, err := newKey()
	if err != nil {
		return KeyPair{}, err
	}
	sn, err := serial()
	if err != nil {
		return KeyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: s.Service},
		DNSNames:     []string{s.Service, s.Service + "." + s.Namespace, s.Service + "." + s.Namespace + ".svc"},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(ServingValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range s.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if notAfter := caCert.NotAfter; tmpl.NotAfter.After(notAfter) {
		tmpl.NotAfter = notAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, signer.Public(), caKey)
	if err != nil {
		return KeyPair{}, fmt.Errorf("issuing serving certificate: %w", err)
	}
	return KeyPair{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

func newest(cs []*x509.Certificate) *x509.Certificate {
	best := cs[0]
	for _, c := range cs[1:] {
		if c.NotAfter.After(best.NotAfter) {
			best = c
		}
	}
	return best
}

// CANeedsRenewal reports whether the signing CA is missing or expires
// within the renewal window.
func CANeedsRenewal(signer *x509.Certificate, now time.Time) bool {
	return signer == nil || !now.Add(RenewBefore).Before(signer.NotAfter)
}

// ServingNeedsRenewal reports whether the serving pair does not verify
// against the CA bundle, lacks a name it must carry, or expires within the
// renewal window.
func ServingNeedsRenewal(pair KeyPair, caBundle []byte, s Serving, now time.Time) bool {
	certs, err := pair.Certificates()
	if err != nil {
		return true
	}
	if _, err := parseKey(pair.KeyPEM); err != nil {
		return true
	}
	leaf := certs[0]
	if !now.Add(RenewBefore).Before(leaf.NotAfter) {
		return true
	}
	return Verify(leaf, caBundle, s, now) != nil
}

// Verify checks that the certificate chains to a CA of the bundle at now
// and carries every name of s.
func Verify(leaf *x509.Certificate, caBundle []byte, s Serving, now time.Time) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		return errors.New("CA bundle holds no certificate")
	}
	names := append([]string{s.Service + "." + s.Namespace + ".svc"}, s.Hosts...)
	for _, name := range names {
		if name == "" {
			continue
		}
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return err
		}
	}
	return nil
}
