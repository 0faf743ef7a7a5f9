package oci

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/pem"
	"fmt"

	cosignpkg "github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// LoadSigningKey reads a private key: cosign's encrypted format (cosign
// generate-key-pair), opened with password, or an unencrypted PEM key
// (PKCS#8, SEC 1 or PKCS#1).
func LoadSigningKey(keyPEM, password []byte) (signature.SignerVerifier, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, fmt.Errorf("not a PEM key")
	}
	if block.Type == cosignpkg.CosignPrivateKeyPemType || block.Type == cosignpkg.SigstorePrivateKeyPemType {
		sv, err := cosignpkg.LoadPrivateKey(keyPEM, password, nil)
		if err != nil {
			return nil, fmt.Errorf("cosign key: %w (the password comes from COSIGN_PASSWORD)", err)
		}
		return sv, nil
	}
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(keyPEM, cryptoutils.SkipPassword)
	if err != nil {
		return nil, err
	}
	return signature.LoadSignerVerifier(priv, crypto.SHA256)
}

// Sign signs the artifact digest with signer as cosign sign --tlog-upload=false
// does: a simple-signing payload naming the digest, written to the
// repository's sha256-<hex>.sig tag next to the signatures already there.
func (r *Remote) Sign(ctx context.Context, digest string, signer signature.Signer) error {
	d := r.repo.Digest(digest)
	body, err := (&payload.Cosign{Image: d}).MarshalJSON()
	if err != nil {
		return err
	}
	sig, err := signer.SignMessage(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("signing %s: %w", digest, err)
	}
	s, err := static.NewSignature(body, base64.StdEncoding.EncodeToString(sig))
	if err != nil {
		return err
	}
	opts := []ociremote.Option{ociremote.WithRemoteOptions(r.options(ctx)...)}
	se, err := ociremote.SignedEntity(d, opts...)
	if err != nil {
		return r.fail("read "+digest+" to sign it in", err)
	}
	signed, err := mutate.AttachSignatureToEntity(se, s)
	if err != nil {
		return err
	}
	if err := ociremote.WriteSignatures(d.Repository, signed, opts...); err != nil {
		return r.fail("write the signature of "+digest+" to", err)
	}
	return nil
}
