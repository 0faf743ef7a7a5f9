package imagetest

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// TUFRepository is a Sigstore-style TUF repository served over HTTP on
// loopback for one test: one signed root, timestamp, snapshot and targets
// (one key for every role), holding a trusted_root.json target, as
// Sigstore's public-good repository holds it.
type TUFRepository struct {
	// URL is the repository's base URL (http://127.0.0.1:port).
	URL string
	// Host is host:port of URL, as an egress allowed address names it.
	Host string
	// Root is the signed root.json a client starts its chain of trust
	// from.
	Root     []byte
	requests atomic.Int64
}

// Requests counts the requests the repository was sent.
func (r *TUFRepository) Requests() int64 { return r.requests.Load() }

// NewTUFRepository serves a repository whose trusted_root.json target
// trusts ca as Fulcio, and log's key as both Rekor and CT log.
func NewTUFRepository(t T, ca *CA, log *Rekor) *TUFRepository {
	t.Helper()
	target := TrustedRootJSON(t, ca, log)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.LoadSigner(priv, crypto.Hash(0))
	if err != nil {
		t.Fatal(err)
	}
	key, err := metadata.KeyFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(24 * time.Hour).UTC()
	rootMD := metadata.Root(expires)
	for _, role := range []string{metadata.ROOT, metadata.TIMESTAMP, metadata.SNAPSHOT, metadata.TARGETS} {
		if err := rootMD.Signed.AddKey(key, role); err != nil {
			t.Fatal(err)
		}
	}
	targets := metadata.Targets(expires)
	tf, err := metadata.TargetFile().FromBytes("trusted_root.json", target, "sha256")
	if err != nil {
		t.Fatal(err)
	}
	targets.Signed.Targets["trusted_root.json"] = tf
	snapshot := metadata.Snapshot(expires)
	timestamp := metadata.Timestamp(expires)

	files := map[string][]byte{}
	sign := func(name string, md interface {
		Sign(signature.Signer) (*metadata.Signature, error)
		ToBytes(bool) ([]byte, error)
	}) []byte {
		if _, err := md.Sign(signer); err != nil {
			t.Fatal(err)
		}
		b, err := md.ToBytes(false)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
		return b
	}
	rootJSON := sign("1.root.json", rootMD)
	// The snapshot names the targets' version, the timestamp the
	// snapshot's, each with hash and length.
	targetsJSON := sign("1.targets.json", targets)
	snapshot.Signed.Meta["targets.json"] = metaFile(targetsJSON)
	snapshotJSON := sign("1.snapshot.json", snapshot)
	timestamp.Signed.Meta["snapshot.json"] = metaFile(snapshotJSON)
	sign("timestamp.json", timestamp)
	sum := sha256.Sum256(target)
	files["targets/"+hex.EncodeToString(sum[:])+".trusted_root.json"] = target

	repo := &TUFRepository{Root: rootJSON}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		repo.requests.Add(1)
		b, ok := files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	repo.URL = srv.URL
	repo.Host = strings.TrimPrefix(srv.URL, "http://")
	return repo
}

func metaFile(b []byte) *metadata.MetaFiles {
	sum := sha256.Sum256(b)
	m := metadata.MetaFile(1)
	m.Length = int64(len(b))
	m.Hashes = metadata.Hashes{"sha256": sum[:]}
	return m
}

// TrustedRootJSON is a Sigstore trusted root that trusts ca as Fulcio,
// and log's key as both Rekor and CT log.
func TrustedRootJSON(t T, ca *CA, log *Rekor) []byte {
	t.Helper()
	id, err := hex.DecodeString(log.LogID)
	if err != nil {
		t.Fatal(err)
	}
	tlog := func(url string) map[string]*root.TransparencyLog {
		return map[string]*root.TransparencyLog{log.LogID: {
			BaseURL: url, ID: id, HashFunc: crypto.SHA256, PublicKey: &log.key.PublicKey, SignatureHashFunc: crypto.SHA256,
			ValidityPeriodStart: time.Now().Add(-time.Hour),
		}}
	}
	fulcio := &root.FulcioCertificateAuthority{Root: ca.cert, ValidityPeriodStart: time.Now().Add(-time.Hour), URI: "https://fulcio.example"}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, []root.CertificateAuthority{fulcio},
		tlog("https://ctfe.example"), nil, tlog("https://rekor.example"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
