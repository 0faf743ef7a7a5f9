package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// Files of the CA kube-controller-manager signs client certificates with
// (CertificateSigningRequests of signer kubernetes.io/kube-apiserver-client),
// in the API server's certificate folder.
const (
	csrSignerCert = "csr-signer.crt"
	csrSignerKey  = "csr-signer.key"
	// clientCAFile is envtest's --client-ca-file in that folder.
	clientCAFile = "client-cert-auth-ca.crt"
)

// writeCSRSigner makes the CA kube-controller-manager signs approved
// client certificate requests with, and adds it to the CAs the API server
// trusts for client certificates, as a real cluster's does: a user
// created by a CertificateSigningRequest (kubectl certificate approve)
// can then authenticate. envtest keeps its own client CA's key in
// memory, so the signer is a CA of its own; the API server reloads its
// client CA file when it changes. It returns the signer's certificate
// and key files.
func writeCSRSigner(pki string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "charter-local-csr-signer"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	certFile, keyFile = filepath.Join(pki, csrSignerCert), filepath.Join(pki, csrSignerKey)
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", err
	}
	f, err := os.OpenFile(filepath.Join(pki, clientCAFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return "", "", fmt.Errorf("adding the CSR signer to the API server's client CAs: %w", err)
	}
	if _, err := f.Write(append([]byte("\n"), certPEM...)); err != nil {
		f.Close()
		return "", "", fmt.Errorf("adding the CSR signer to the API server's client CAs: %w", err)
	}
	return certFile, keyFile, f.Close()
}
