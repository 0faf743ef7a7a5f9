package jmespath

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

func TestImageNormalize(t *testing.T) {
	runFnCases(t, []fnCase{
		{expr: "image_normalize('nginx')", want: "docker.io/nginx:latest"},
		{expr: "image_normalize('nginx:1.25')", want: "docker.io/nginx:1.25"},
		{expr: "image_normalize('library/nginx')", want: "docker.io/library/nginx:latest"},
		{expr: "image_normalize('ghcr.io/org/app:v1')", want: "ghcr.io/org/app:v1"},
		{expr: "image_normalize('localhost:5000/app')", want: "localhost:5000/app:latest"},
		{expr: "image_normalize('localhost/app')", want: "localhost/app:latest"},
		{expr: "image_normalize('org/app')", want: "docker.io/org/app:latest"},
		{expr: "image_normalize('nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef')",
			want: "docker.io/nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		{expr: "image_normalize('nginx:1.25@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef')",
			want: "docker.io/nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		{expr: "image_normalize('Nginx')", wantErr: "invalid repository name"},
		{expr: "image_normalize('nginx:bad tag')", wantErr: "invalid tag"},
		{expr: "image_normalize('nginx@sha256:xyz')", wantErr: "invalid digest"},
		{expr: "image_normalize('')", wantErr: "empty image reference"},
	})
	got, err := New(WithDefaultRegistry("registry.corp")).Search("image_normalize('nginx')", nil)
	if err != nil || got != "registry.corp/nginx:latest" {
		t.Errorf("with default registry: %v, %v", got, err)
	}
}

func TestIsExternalURLWithoutDNS(t *testing.T) {
	_, err := New(WithLookupIP(nil)).Search("is_external_url('https://public.example')", nil)
	if err == nil || !strings.Contains(err.Error(), "name resolution is disabled") {
		t.Errorf("error = %v", err)
	}
}

func TestIsExternalURL(t *testing.T) {
	runFnCases(t, []fnCase{
		{expr: "is_external_url('https://8.8.8.8/x')", want: true},
		{expr: "is_external_url('http://127.0.0.1:8080')", want: false},
		{expr: "is_external_url('http://[::1]/')", want: false},
		{expr: "is_external_url('http://192.168.1.10')", want: false},
		{expr: "is_external_url('http://10.1.2.3')", want: false},
		{expr: "is_external_url('https://public.example/a')", want: true},
		{expr: "is_external_url('https://internal.example/a')", want: false},
		{expr: "is_external_url('https://nxdomain.example/a')", wantErr: "no such host"},
		{expr: "is_external_url('not a url')", wantErr: "has no host"},
		{expr: "is_external_url('http://%zz')", wantErr: "invalid URL escape"},
	})
}

// testPEM returns a self-signed certificate and a CSR for key, PEM-encoded.
func testPEM(t *testing.T, key any, pub any) (cert, csr string) {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(42),
		Subject:      pkix.Name{CommonName: "charter-test", Organization: []string{"charter"}},
		NotBefore:    time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:     time.Date(2034, 1, 1, 0, 0, 0, 0, time.UTC),
		DNSNames:     []string{"svc.example"},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	csrDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: tmpl.Subject, DNSNames: tmpl.DNSNames}, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csrDER}))
}

func TestX509Decode(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	cert, csr := testPEM(t, rsaKey, &rsaKey.PublicKey)
	i := New()
	data := map[string]any{"cert": cert, "csr": csr}

	for _, tc := range []struct{ expr, want string }{
		{"x509_decode(cert).Subject.CommonName", "charter-test"},
		{"x509_decode(cert).DNSNames[0]", "svc.example"},
		{"x509_decode(cert).NotAfter", "2034-01-01T00:00:00Z"},
		{"x509_decode(cert).PublicKey.N", rsaKey.N.String()},
		{"to_string(x509_decode(cert).PublicKey.E)", "65537"},
		{"to_string(x509_decode(cert).IsCA)", "true"},
		{"x509_decode(csr).Subject.CommonName", "charter-test"},
		{"x509_decode(csr).PublicKey.N", rsaKey.N.String()},
	} {
		got, err := i.Search(tc.expr, data)
		if err != nil || got != tc.want {
			t.Errorf("%s = %v, %v; want %q", tc.expr, got, err, tc.want)
		}
	}

	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecCert, _ := testPEM(t, ecKey, &ecKey.PublicKey)
	runFnCases(t, []fnCase{
		{expr: "x509_decode('garbage')", wantErr: "no PEM block"},
		{expr: "x509_decode(@)", data: jsonString(ecCert), wantErr: "certificate should use rsa algorithm"},
		{expr: "x509_decode(@)", data: jsonString(string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}))), wantErr: `invalid PEM block type "PRIVATE KEY"`},
		{expr: "x509_decode(@)", data: jsonString(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}}))), wantErr: "x509"},
	})
}

func jsonString(s string) string {
	b := []byte{'"'}
	for _, r := range s {
		switch r {
		case '\n':
			b = append(b, '\\', 'n')
		case '"', '\\':
			b = append(b, '\\', byte(r))
		default:
			b = append(b, string(r)...)
		}
	}
	return string(append(b, '"'))
}
