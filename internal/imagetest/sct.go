package imagetest

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"time"

	ct "github.com/google/certificate-transparency-go"
	cttls "github.com/google/certificate-transparency-go/tls"
	ctx509 "github.com/google/certificate-transparency-go/x509"
)

// oidSCTList is the X.509 extension of embedded SCTs (RFC 6962 3.3).
var oidSCTList = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 11129, 2, 4, 2}

// withEmbeddedSCT returns tmpl's certificate, issued by ca, carrying an
// SCT of log as Fulcio's certificates do: the log signs the certificate's
// TBS without the SCT list (the precertificate's, as a verifier
// rebuilds it), and the list is added as the last extension, so that
// removing it gives back exactly the TBS that was signed.
func (ca *CA) withEmbeddedSCT(t T, tmpl *x509.Certificate, pub any, log *Rekor) []byte {
	t.Helper()
	pre, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := x509.ParseCertificate(pre)
	if err != nil {
		t.Fatal(err)
	}
	logID := sha256.Sum256(mustPKIX(t, &log.key.PublicKey))
	sct := ct.SignedCertificateTimestamp{
		SCTVersion: ct.V1,
		LogID:      ct.LogID{KeyID: logID},
		Timestamp:  uint64(time.Now().UnixMilli()),
	}
	input, err := ct.SerializeSCTSignatureInput(sct, ct.LogEntry{Leaf: ct.MerkleTreeLeaf{
		Version: ct.V1, LeafType: ct.TimestampedEntryLeafType,
		TimestampedEntry: &ct.TimestampedEntry{
			Timestamp: sct.Timestamp, EntryType: ct.PrecertLogEntryType,
			PrecertEntry: &ct.PreCert{
				IssuerKeyHash:  sha256.Sum256(ca.cert.RawSubjectPublicKeyInfo),
				TBSCertificate: parsed.RawTBSCertificate,
			},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sig, err := cttls.CreateSignature(*log.key, cttls.SHA256, input)
	if err != nil {
		t.Fatal(err)
	}
	sct.Signature = ct.DigitallySigned(sig)
	serialized, err := cttls.Marshal(sct)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cttls.Marshal(ctx509.SignedCertificateTimestampList{SCTList: []ctx509.SerializedSCT{{Val: serialized}}})
	if err != nil {
		t.Fatal(err)
	}
	value, err := asn1.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	withSCT := *tmpl
	withSCT.ExtraExtensions = append(append([]pkix.Extension(nil), tmpl.ExtraExtensions...), pkix.Extension{Id: oidSCTList, Value: value})
	der, err := x509.CreateCertificate(rand.Reader, &withSCT, ca.cert, pub, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func mustPKIX(t T, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return der
}
