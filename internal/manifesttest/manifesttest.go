// Package manifesttest signs Kubernetes YAML manifests as
// k8s-manifest-sigstore does, for tests of validate.manifests: the
// message annotation is base64 of a gzipped tar holding the YAML, the
// signature annotation base64 of an ECDSA signature over the tar.
package manifesttest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"testing"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Key is a generated ECDSA P-256 key pair.
type Key struct {
	Signer    signature.Signer
	PublicPEM string
}

// NewKey generates a key.
func NewKey(t testing.TB) Key {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	s, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return Key{Signer: s, PublicPEM: string(pub)}
}

// Annotations signs yaml (one or more documents) and returns the
// annotations to put on the resource, under domain
// (cosign.sigstore.dev when empty).
func Annotations(t testing.TB, key Key, domain string, yaml []byte) map[string]string {
	t.Helper()
	if domain == "" {
		domain = "cosign.sigstore.dev"
	}
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	if err := tw.WriteHeader(&tar.Header{Name: "manifest.yaml", Mode: 0o644, Size: int64(len(yaml)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(yaml); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(tarball.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	sig, err := key.Signer.SignMessage(bytes.NewReader(tarball.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		domain + "/message":   base64.StdEncoding.EncodeToString(gz.Bytes()),
		domain + "/signature": base64.StdEncoding.EncodeToString(sig),
	}
}
