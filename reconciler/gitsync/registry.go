package gitsync

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/egress"
)

// Bounds of the cache of verified artifact signatures: a result is the
// digest's and the trusted keys', so it stays true; the TTL only bounds
// how long a revoked key keeps being trusted for an artifact already
// verified.
const (
	signatureCacheSize = 1000
	signatureCacheTTL  = time.Hour
)

// NewSignatureVerifier returns the verifier of OCI artifacts' cosign
// signatures: imageverify's, with its digest-keyed cache, reading pull
// secrets with secrets, reaching registries and transparency logs
// through guard (egress's defaults when nil), keyless signatures checked
// against trust (Sigstore's public TUF repository when nil), and never
// with charter's own registry credentials.
func NewSignatureVerifier(secrets client.Reader, guard *egress.Guard, trust imageverify.PublicTrust) *imageverify.Verifier {
	return imageverify.New(imageverify.Options{
		Secrets:         secretReader{secrets},
		Egress:          guard,
		PublicTrust:     trust,
		Cache:           imageverify.NewCache(signatureCacheSize, signatureCacheTTL, nil),
		DefaultKeychain: authn.NewMultiKeychain(),
		Timeout:         30 * time.Second,
	})
}

// secretReader reads Secrets for imageverify.
type secretReader struct{ client.Reader }

func (s secretReader) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	var secret corev1.Secret
	if err := s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &secret); err != nil {
		return nil, err
	}
	return &secret, nil
}

// registryTransport carries an oci:// repository's requests: under the
// egress guard, as every registry call of charter is, since a
// repository's URL (a tenant's too) chooses the address charter dials.
func (r *PolicyRepositoryReconciler) registryTransport() http.RoundTripper {
	r.transportOnce.Do(func() {
		if r.RegistryTransport != nil {
			return
		}
		g := r.Egress
		if g == nil {
			var err error
			if g, err = egress.New(); err != nil {
				r.RegistryTransport = refuseAll{fmt.Errorf("egress guard: %w", err)}
				return
			}
		}
		base, _ := remote.DefaultTransport.(*http.Transport)
		r.RegistryTransport = g.Transport(base)
	})
	return r.RegistryTransport
}

type refuseAll struct{ err error }

func (r refuseAll) RoundTrip(*http.Request) (*http.Response, error) { return nil, r.err }
