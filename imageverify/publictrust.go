package imageverify

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore-go/pkg/root"
	sigstoretuf "github.com/sigstore/sigstore-go/pkg/tuf"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/tuf"
	"github.com/theupdateframework/go-tuf/v2/metadata/fetcher"
	"golang.org/x/sync/singleflight"

	"github.com/charter-dev/charter/internal/egress"
)

// DefaultTUFMirror is Sigstore's public-good TUF repository, from which
// the public Fulcio roots and Rekor and CT log keys come when a policy
// gives none (as in Kyverno and cosign).
const DefaultTUFMirror = sigstoretuf.DefaultMirror

// DefaultTUFRefresh is how long fetched trust material is used before the
// TUF repository is asked again.
const DefaultTUFRefresh = 24 * time.Hour

// trustedRootTarget is the TUF target that holds Sigstore's trust
// material (Fulcio CAs, Rekor and CT log keys) in one document.
const trustedRootTarget = "trusted_root.json"

// PublicTrust is where the public-good Sigstore trust material comes from
// when an attestor names none of its own: the Fulcio CA of keyless
// signatures and the keys of the Rekor and CT logs.
type PublicTrust interface {
	FulcioRoots(context.Context) ([]*x509.Certificate, error)
	RekorPubs(context.Context) (*cosign.TrustedTransparencyLogPubKeys, error)
	CTLogPubs(context.Context) (*cosign.TrustedTransparencyLogPubKeys, error)
}

// TUFTrust reads the public trust material from a Sigstore TUF repository
// through the egress guard. cosign's own TUF client fetches with Go's
// default HTTP client, from a mirror set by environment and files in the
// home directory: no guard on the address dialled, no bound on time or
// size, and a process-wide client that keeps its first failure. This one
// fetches on the guard's client (every request and redirect checked on
// the address dialled, each bounded), from the mirror the operator
// configures, verifying the repository's metadata from the root it is
// given, and keeps the material in memory only. It is safe for
// concurrent use.
type TUFTrust struct {
	o      TUFOptions
	client *egressClient

	mu      sync.Mutex
	trusted *root.TrustedRoot
	fetched time.Time
	flight  singleflight.Group
}

// TUFOptions configure a TUFTrust.
type TUFOptions struct {
	// Mirror is the TUF repository's base URL; "" means DefaultTUFMirror.
	Mirror string
	// Root is the TUF root.json the client starts its chain of trust from
	// (the repository's first root or a later one it signed); nil means
	// Sigstore's public-good root, which sigstore-go ships.
	Root []byte
	// Egress guards every request; nil means egress's defaults. A mirror
	// on a blocked address (loopback, link-local, the node's own) must be
	// let through explicitly (--egress-allow).
	Egress *egress.Guard
	// Refresh is how long fetched material is used before the repository
	// is asked again (DefaultTUFRefresh when 0). When asking fails, the
	// last material fetched stays in use.
	Refresh time.Duration
}

// egressClient is the guard's HTTP client, or the error that kept the
// default guard from being built (then every fetch fails with it).
type egressClient struct {
	guard *egress.Guard
	err   error
}

// NewTUFTrust returns a TUFTrust; it fetches nothing until asked.
func NewTUFTrust(o TUFOptions) *TUFTrust {
	if o.Mirror == "" {
		o.Mirror = DefaultTUFMirror
	}
	if o.Root == nil {
		o.Root = sigstoretuf.DefaultRoot()
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultTUFRefresh
	}
	c := &egressClient{guard: o.Egress}
	if c.guard == nil {
		c.guard, c.err = egress.New()
	}
	return &TUFTrust{o: o, client: c}
}

// ReadTUFRoot reads a TUF root.json file (serve --sigstore-tuf-root); ""
// means nil, Sigstore's public-good root.
func ReadTUFRoot(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the TUF root: %w", err)
	}
	return b, nil
}

// TrustedRoot returns the repository's trusted root, fetched at most once
// per refresh period; a fetch that fails while a former one is at hand
// keeps that one.
func (t *TUFTrust) TrustedRoot(ctx context.Context) (*root.TrustedRoot, error) {
	t.mu.Lock()
	cur, fresh := t.trusted, t.trusted != nil && time.Since(t.fetched) < t.o.Refresh
	t.mu.Unlock()
	if fresh {
		return cur, nil
	}
	ch := t.flight.DoChan("fetch", func() (any, error) { return t.fetch() })
	select {
	case r := <-ch:
		if r.Err != nil {
			if cur != nil {
				return cur, nil
			}
			return nil, r.Err
		}
		return r.Val.(*root.TrustedRoot), nil
	case <-ctx.Done():
		if cur != nil {
			return cur, nil
		}
		return nil, fmt.Errorf("the Sigstore TUF repository %s: %w", t.o.Mirror, ctx.Err())
	}
}

// fetch updates the repository's metadata from the root, verifying each
// step, and reads the trusted root target. It runs under no caller's
// context: the guard bounds each request, and a caller that stops waiting
// leaves it to finish for the next.
func (t *TUFTrust) fetch() (*root.TrustedRoot, error) {
	if t.client.err != nil {
		return nil, fmt.Errorf("the Sigstore TUF repository %s: egress guard: %w", t.o.Mirror, t.client.err)
	}
	f := fetcher.NewDefaultFetcher()
	f.SetHTTPClient(t.client.guard.Client(nil))
	c, err := sigstoretuf.New(&sigstoretuf.Options{
		Root: t.o.Root, RepositoryBaseURL: t.o.Mirror, Fetcher: f,
		// In memory only: charter writes nothing to its home directory,
		// and a restart verifies the chain again from the root.
		DisableLocalCache: true,
	})
	if err != nil {
		return nil, fmt.Errorf("the Sigstore TUF repository %s: %w", t.o.Mirror, err)
	}
	b, err := c.GetTarget(trustedRootTarget)
	if err != nil {
		return nil, fmt.Errorf("the Sigstore TUF repository %s: %w", t.o.Mirror, err)
	}
	tr, err := root.NewTrustedRootFromJSON(b)
	if err != nil {
		return nil, fmt.Errorf("the Sigstore TUF repository %s: %s: %w", t.o.Mirror, trustedRootTarget, err)
	}
	t.mu.Lock()
	t.trusted, t.fetched = tr, time.Now()
	t.mu.Unlock()
	return tr, nil
}

// FulcioRoots returns the certificates (roots and intermediates) of the
// repository's Fulcio CAs.
func (t *TUFTrust) FulcioRoots(ctx context.Context) ([]*x509.Certificate, error) {
	tr, err := t.TrustedRoot(ctx)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for _, ca := range tr.FulcioCertificateAuthorities() {
		if f, ok := ca.(*root.FulcioCertificateAuthority); ok {
			if f.Root != nil {
				certs = append(certs, f.Root)
			}
			certs = append(certs, f.Intermediates...)
		}
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("the Sigstore TUF repository %s: no Fulcio certificate authority in %s", t.o.Mirror, trustedRootTarget)
	}
	return certs, nil
}

// RekorPubs returns the keys of the repository's Rekor logs.
func (t *TUFTrust) RekorPubs(ctx context.Context) (*cosign.TrustedTransparencyLogPubKeys, error) {
	tr, err := t.TrustedRoot(ctx)
	if err != nil {
		return nil, err
	}
	return logPubKeys(tr.RekorLogs(), "Rekor", t.o.Mirror)
}

// CTLogPubs returns the keys of the repository's certificate
// transparency logs.
func (t *TUFTrust) CTLogPubs(ctx context.Context) (*cosign.TrustedTransparencyLogPubKeys, error) {
	tr, err := t.TrustedRoot(ctx)
	if err != nil {
		return nil, err
	}
	return logPubKeys(tr.CTLogs(), "CT", t.o.Mirror)
}

// logPubKeys turns a trusted root's logs into cosign's keys: a log whose
// validity has ended is Expired (it still verifies entries made while it
// was valid), the others Active.
func logPubKeys(logs map[string]*root.TransparencyLog, kind, mirror string) (*cosign.TrustedTransparencyLogPubKeys, error) {
	keys := cosign.NewTrustedTransparencyLogPubKeys()
	for id, l := range logs {
		pem, err := cryptoutils.MarshalPublicKeyToPEM(l.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("the Sigstore TUF repository %s: %s log %s: %w", mirror, kind, id, err)
		}
		status := tuf.Active
		if !l.ValidityPeriodEnd.IsZero() && l.ValidityPeriodEnd.Before(time.Now()) {
			status = tuf.Expired
		}
		if err := keys.AddTransparencyLogPubKey(pem, status); err != nil {
			return nil, fmt.Errorf("the Sigstore TUF repository %s: %s log %s: %w", mirror, kind, id, err)
		}
	}
	if len(keys.Keys) == 0 {
		return nil, errors.New("the Sigstore TUF repository " + mirror + ": no " + kind + " log in " + trustedRootTarget)
	}
	return &keys, nil
}
