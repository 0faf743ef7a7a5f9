package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/charter-dev/charter/imageverify"
	"github.com/charter-dev/charter/internal/egress"
)

// imageVerifyOptions configure image verification (verifyImages rules).
type imageVerifyOptions struct {
	cacheSize int
	cacheTTL  time.Duration
	timeout   time.Duration
	// tufMirror and tufRootFile are where the public Fulcio roots and
	// Rekor and CT log keys come from (Sigstore's TUF repository), for
	// attestors that name none; tufRoot is the file's content, read by
	// check.
	tufMirror, tufRootFile string
	tufRoot                []byte
}

// defaultImageVerifyOptions are the flags' defaults, which charter dev
// uses too.
func defaultImageVerifyOptions() imageVerifyOptions {
	return imageVerifyOptions{cacheSize: 1000, cacheTTL: time.Hour, timeout: 5 * time.Second, tufMirror: imageverify.DefaultTUFMirror}
}

func addImageVerifyFlags(f *pflag.FlagSet, o *imageVerifyOptions) {
	d := defaultImageVerifyOptions()
	f.IntVar(&o.cacheSize, "image-verify-cache-size", d.cacheSize, "verified image results and fetched image data kept, keyed by image digest (and the policy rule's check); 0 disables the cache")
	f.DurationVar(&o.cacheTTL, "image-verify-cache-ttl", d.cacheTTL, "how long a verified image result is reused before the registry is asked again")
	f.DurationVar(&o.timeout, "image-verify-timeout", d.timeout, "bound on verifying one image (all its registry requests); must be below --request-timeout so a slow registry gives charter's answer, not the API server's")
	f.StringVar(&o.tufMirror, "sigstore-tuf-mirror", d.tufMirror,
		"the Sigstore TUF repository the public Fulcio roots and Rekor and CT log keys are read from, for image attestors that name none of their own (keyless without roots, Rekor or CT log without a key); fetched through the egress guard (--cel-http-blocklist, --egress-allow), so a mirror on loopback or a private address must be let through")
	f.StringVar(&o.tufRootFile, "sigstore-tuf-root", "",
		"file holding the TUF root.json of --sigstore-tuf-mirror, from which its metadata is verified; empty means Sigstore's public-good root")
}

// verifier returns the image verifier of a process; secrets, when not
// nil, reads the pull secrets checks name; guard is the egress guard of
// its registry and Rekor requests (loaders.HTTPLimits.RegistryGuard).
func (o imageVerifyOptions) verifier(secrets imageverify.SecretReader, guard *egress.Guard) *imageverify.Verifier {
	var cache *imageverify.Cache
	if o.cacheSize > 0 && o.cacheTTL > 0 {
		cache = imageverify.NewCache(o.cacheSize, o.cacheTTL, nil)
	}
	return imageverify.New(imageverify.Options{Secrets: secrets, Cache: cache, Timeout: o.timeout, Egress: guard, PublicTrust: o.publicTrust(guard)})
}

// publicTrust is the Sigstore trust of --sigstore-tuf-mirror and
// --sigstore-tuf-root, fetched through guard: admission's image
// verification and gitsync's keyless artifact verification share it.
func (o imageVerifyOptions) publicTrust(guard *egress.Guard) imageverify.PublicTrust {
	return imageverify.NewTUFTrust(imageverify.TUFOptions{Mirror: o.tufMirror, Root: o.tufRoot, Egress: guard})
}

// check refuses values verification cannot run with, and reads
// --sigstore-tuf-root.
func (o *imageVerifyOptions) check(requestTimeout time.Duration) error {
	if o.timeout <= 0 || o.timeout >= requestTimeout {
		return fmt.Errorf("--image-verify-timeout %s must be positive and below --request-timeout %s", o.timeout, requestTimeout)
	}
	if o.tufMirror == "" {
		return fmt.Errorf("--sigstore-tuf-mirror is empty: want the URL of a Sigstore TUF repository (default %s)", imageverify.DefaultTUFMirror)
	}
	if u, err := url.Parse(o.tufMirror); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("--sigstore-tuf-mirror %q: want an http or https URL", o.tufMirror)
	}
	root, err := imageverify.ReadTUFRoot(o.tufRootFile)
	if err != nil {
		return fmt.Errorf("--sigstore-tuf-root: %w", err)
	}
	o.tufRoot = root
	return nil
}

// secretReader reads pull secrets through a client that goes to the API
// server (the manager's client does not cache Secrets).
type secretReader struct{ client.Reader }

func (r secretReader) Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	var s corev1.Secret
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// cliImageVerifier verifies images for `charter apply` and `charter
// test`: against each image's own registry with the local Docker
// credentials, or against registry (host[:port]) when it is given, which
// then serves every image's repository. The CLI runs on the user's own
// machine with the user's own reach, as Kyverno's CLI does, so its egress
// is open: a local registry on loopback is what --registry is for.
func cliImageVerifier(registry string) *imageverify.Verifier {
	return imageverify.New(imageverify.Options{Mirror: registry, Timeout: 30 * time.Second,
		Cache: imageverify.NewCache(1000, time.Hour, nil), Egress: egress.Open()})
}

const registryFlagHelp = "verify the images of verifyImages rules against this registry (host[:port]) instead of each image's own, e.g. a local registry holding the same repositories; plain HTTP on loopback"
