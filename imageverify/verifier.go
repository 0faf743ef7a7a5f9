// Package imageverify is the cosign-backed implementation of the engine's
// ImageVerifier: it reaches registries through go-containerregistry with
// the credentials a check names (pull secrets, the node's credential
// helpers, the entry's imageRegistryCredentials), verifies signatures and
// in-toto attestations with cosign's library, applies Kyverno's identity
// and annotation rules on what cosign verified, and keeps a cache of
// results keyed by image digest and the exact check, never by tag.
//
// Only what verification needs is linked in: no cloud KMS providers and no
// cloud credential helpers. Keys come from PEM text; trust roots for
// keyless signatures come from the policy's roots, else (as in Kyverno)
// the public-good Fulcio CA's from Sigstore's TUF repository, fetched
// through the egress guard (TUFTrust).
package imageverify

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"golang.org/x/sync/singleflight"

	kyvernov1 "github.com/charter-dev/charter/api/kyverno/v1"
	"github.com/charter-dev/charter/engine/loader"
	"github.com/charter-dev/charter/internal/egress"
)

// Verifier verifies images with cosign. It is safe for concurrent use.
type Verifier struct {
	o      Options
	cache  *Cache
	flight singleflight.Group
}

var _ loader.ImageVerifier = (*Verifier)(nil)

// Options configure a Verifier.
type Options struct {
	// Secrets reads the pull secrets checks name; nil reads none (a check
	// naming secrets then fails to run).
	Secrets SecretReader
	// Egress guards every registry and transparency-log request: the
	// image of a Pod names its registry and a policy its Rekor URL, so a
	// tenant chooses where charter connects. nil means egress's defaults
	// (no loopback, unspecified, link-local, cloud metadata or node
	// address, checked on the address dialled and every redirect); tests
	// with a registry on loopback allow its address, and the CLI passes
	// egress.Open().
	Egress *egress.Guard
	// Transport, when set, carries registry requests instead of
	// remote.DefaultTransport under Egress: the caller answers for what
	// it reaches (tests that count requests).
	Transport http.RoundTripper
	// Timeout bounds one verification (all its registry requests); it
	// must sit below the webhook timeout so charter, not the API server,
	// decides what a slow registry means. Zero means 5 s.
	Timeout time.Duration
	// Cache holds verified results; nil caches nothing.
	Cache *Cache
	// Insecure allows plain-HTTP registries for every check.
	Insecure bool
	// PublicTrust is where the Fulcio roots and the Rekor and CT log keys
	// come from when an attestor names none; nil means a TUFTrust of
	// Sigstore's public-good TUF repository under Egress.
	PublicTrust PublicTrust
	// FulcioRoots returns the CA certificates that keyless attestors
	// without roots trust; nil means PublicTrust's.
	FulcioRoots func(context.Context) ([]*x509.Certificate, error)
	// DefaultKeychain is the "default" credential provider's keychain;
	// authn.DefaultKeychain (the process's Docker config and credential
	// helpers) when nil. gitsync passes an empty one: a tenant's
	// PolicyRepository must not reach a registry with charter's own
	// credentials.
	DefaultKeychain authn.Keychain
	// Mirror, when set ("host[:port]"), is asked instead of every image's
	// own registry: the same repository, tag and digest there. The CLI's
	// --registry uses it to verify against a local registry.
	Mirror string
	Log    logr.Logger
}

// New returns a Verifier.
func New(o Options) *Verifier {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Transport == nil {
		o.Transport = guardedTransport(o.Egress)
	}
	if o.PublicTrust == nil {
		o.PublicTrust = NewTUFTrust(TUFOptions{Egress: o.Egress})
	}
	if o.FulcioRoots == nil {
		o.FulcioRoots = o.PublicTrust.FulcioRoots
	}
	if o.DefaultKeychain == nil {
		o.DefaultKeychain = authn.DefaultKeychain
	}
	return &Verifier{o: o, cache: o.Cache}
}

// guardedTransport is go-containerregistry's default transport under g
// (egress's defaults when nil). A default guard that cannot be built (the
// node's addresses unreadable) refuses every request rather than guard
// nothing.
func guardedTransport(g *egress.Guard) http.RoundTripper {
	if g == nil {
		var err error
		if g, err = egress.New(); err != nil {
			return refuseAll{err}
		}
	}
	base, _ := remote.DefaultTransport.(*http.Transport)
	return g.Transport(base)
}

type refuseAll struct{ err error }

func (r refuseAll) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("egress guard: %w", r.err)
}

// ResolveDigest returns the digest the reference points to now.
func (v *Verifier) ResolveDigest(ctx context.Context, image string, creds loader.ImageCredentials) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, v.o.Timeout)
	defer cancel()
	ref, opts, err := v.reference(ctx, image, creds)
	if err != nil {
		return "", err
	}
	d, err := ociremote.ResolveDigest(ref, opts...)
	if err != nil {
		return "", classify(fmt.Errorf("failed to resolve digest for image %s: %w", image, err))
	}
	return d.DigestStr(), nil
}

// VerifySignatures checks the image's signatures against the attestor.
func (v *Verifier) VerifySignatures(ctx context.Context, check loader.ImageCheck) (loader.ImageVerified, error) {
	return v.verify(ctx, check, kindSignatures)
}

// VerifyAttestations returns the statements the attestor signed for the
// image.
func (v *Verifier) VerifyAttestations(ctx context.Context, check loader.ImageCheck) (loader.ImageVerified, error) {
	return v.verify(ctx, check, kindAttestations)
}

type checkKind string

const (
	kindSignatures   checkKind = "signatures"
	kindAttestations checkKind = "attestations"
)

// verify resolves the image to its digest first: the cache is keyed by
// that digest and the check, so a tag moved to an unverified image never
// finds the old image's result (§8.1 of the spec). An image named by
// digest is looked up in the cache before anything else: a cache hit
// parses no reference, builds no keychain and reads no pull secret.
func (v *Verifier) verify(ctx context.Context, check loader.ImageCheck, kind checkKind) (loader.ImageVerified, error) {
	var key string
	if repo, digest, ok := strings.Cut(check.Image, "@"); ok && check.UseCache && v.cache != nil {
		var err error
		if key, err = cacheKey(repo, digest, kind, check); err != nil {
			return loader.ImageVerified{}, err
		}
		if res, ok := v.cache.Get(key, check.VerifiedSince); ok {
			res.Cached = true
			return res, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, v.o.Timeout)
	defer cancel()
	ref, opts, err := v.reference(ctx, check.Image, check.Credentials)
	if err != nil {
		return loader.ImageVerified{}, err
	}
	digest, err := ociremote.ResolveDigest(ref, opts...)
	if err != nil {
		var terr *transport.Error
		if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
			return loader.ImageVerified{}, fmt.Errorf("image tag not found: %w", err)
		}
		return loader.ImageVerified{}, classify(err)
	}
	if key == "" {
		if key, err = cacheKey(repository(check.Image), digest.DigestStr(), kind, check); err != nil {
			return loader.ImageVerified{}, err
		}
		if check.UseCache && v.cache != nil {
			if res, ok := v.cache.Get(key, check.VerifiedSince); ok {
				res.Cached = true
				return res, nil
			}
		}
	}
	// Concurrent admissions of the same image and check share one
	// verification.
	out, err, _ := v.flight.Do(key, func() (any, error) {
		res, err := v.verifyDigest(ctx, digest, check, kind, opts)
		if err != nil {
			return loader.ImageVerified{}, classify(err)
		}
		if v.cache != nil {
			v.cache.Put(key, res)
		}
		return res, nil
	})
	return out.(loader.ImageVerified), err
}

// repository is the image reference without its tag and digest.
func repository(image string) string {
	image, _, _ = strings.Cut(image, "@")
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image[slash+1:], ":"); colon >= 0 {
		image = image[:slash+1+colon]
	}
	return image
}

func (v *Verifier) verifyDigest(ctx context.Context, digest name.Digest, check loader.ImageCheck, kind checkKind, opts []ociremote.Option) (loader.ImageVerified, error) {
	if check.Type == kyvernov1.Notary {
		return v.verifyNotary(ctx, digest, check, kind)
	}
	co, id, reach, err := v.checkOpts(ctx, check, kind)
	if err != nil {
		return loader.ImageVerified{}, err
	}
	res, err := v.verifyWith(ctx, digest, check, kind, co, id, opts)
	if err != nil && reach.failure() != nil {
		// The transparency log could not be asked: no verdict.
		return res, &loader.ImageUnavailableError{Err: err}
	}
	return res, err
}

func (v *Verifier) verifyWith(ctx context.Context, digest name.Digest, check loader.ImageCheck, kind checkKind, co *cosign.CheckOpts, id *identity, opts []ociremote.Option) (loader.ImageVerified, error) {
	co.RegistryClientOpts = opts
	if check.Repository != "" {
		repo, err := name.NewRepository(check.Repository, v.nameOptions(check.Credentials)...)
		if err != nil {
			return loader.ImageVerified{}, fmt.Errorf("invalid repository %q: %w", check.Repository, err)
		}
		co.RegistryClientOpts = append(co.RegistryClientOpts, ociremote.WithTargetRepository(repo))
	}
	res := loader.ImageVerified{Digest: digest.DigestStr()}
	switch kind {
	case kindSignatures:
		co.ClaimVerifier = cosign.SimpleClaimVerifier
		sigs, _, err := cosign.VerifyImageSignatures(ctx, digest, co)
		if err != nil {
			return res, err
		}
		if err := id.accept(sigs); err != nil {
			return res, err
		}
		if err := matchAnnotations(sigs, check.Attestor.Annotations); err != nil {
			return res, err
		}
	case kindAttestations:
		co.ClaimVerifier = cosign.IntotoSubjectClaimVerifier
		atts, _, err := cosign.VerifyImageAttestations(ctx, digest, co)
		if err != nil {
			if isNotFound(err) {
				return res, errors.New("not found")
			}
			return res, err
		}
		for _, att := range atts {
			if err := id.accept1(att); err != nil {
				continue
			}
			st, err := decodeStatement(att)
			if err != nil {
				return res, err
			}
			res.Statements = append(res.Statements, st)
		}
		if len(res.Statements) == 0 && len(atts) > 0 {
			return res, id.accept(atts)
		}
	}
	return res, nil
}

// classify marks errors that say the verification could not run (the
// registry unreachable, overloaded or failing, or the time budget spent)
// as loader.ImageUnavailableError; everything else is a verdict on the
// image. Kyverno treats only *net.OpError so (§8.10); charter adds
// addresses the egress guard refuses.
func classify(err error) error {
	if err == nil || loader.IsImageUnavailable(err) {
		return err
	}
	var op *net.OpError
	var dns *net.DNSError
	var terr *transport.Error
	var netErr net.Error
	switch {
	// A refused address is a registry charter may not reach: unreachable,
	// not a verdict on the image.
	case egress.IsBlocked(err):
	case errors.As(err, &op), errors.As(err, &dns):
	case errors.As(err, &netErr) && netErr.Timeout():
	case errors.As(err, &terr) && (terr.StatusCode == http.StatusTooManyRequests || terr.StatusCode >= 500):
	default:
		return err
	}
	return &loader.ImageUnavailableError{Err: err}
}

func isNotFound(err error) bool {
	var terr *transport.Error
	return errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound
}
