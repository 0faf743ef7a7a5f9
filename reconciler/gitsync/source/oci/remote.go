package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/reconciler/gitsync/source"
)

// Media types of Flux's artifact format.
const (
	ConfigMediaType  types.MediaType = "application/vnd.cncf.flux.config.v1+json"
	ContentMediaType types.MediaType = "application/vnd.cncf.flux.content.v1.tar+gzip"
)

// OCI annotations charter push writes and the reconciler reports.
const (
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationCreated  = "org.opencontainers.image.created"
)

// maxManifestBytes bounds the manifest charter reads: Flux's is a few
// hundred bytes, and registries cap manifests at 4 MiB.
const maxManifestBytes = 4 << 20

// Error is a failed registry operation, naming the operation and the
// repository. Credentials never appear in it: go-containerregistry's
// errors carry the registry's words, not the request's headers.
type Error struct {
	Op, URL string
	Err     error
	// Auth is true when the registry refused the credentials.
	Auth bool
	// NotFound is true when the tag, digest or repository is unknown.
	NotFound bool
}

func (e *Error) Error() string { return fmt.Sprintf("%s %s: %v", e.Op, e.URL, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// ArtifactError is an artifact charter does not extract: not in Flux's
// format, or a tarball holding a link or a path outside its folder. The
// artifact does not change under its digest, so retrying cannot help.
type ArtifactError struct {
	Digest string
	Msg    string
}

func (e *ArtifactError) Error() string { return fmt.Sprintf("artifact %s: %s", e.Digest, e.Msg) }

// Remote is an OCI repository and how to reach it.
type Remote struct {
	repo name.Repository
	url  string
	opts []remote.Option
}

// Option configures a Remote.
type Option func(*config)

type config struct {
	insecure  bool
	keychain  authn.Keychain
	transport http.RoundTripper
}

// WithInsecure lets the Remote use plain HTTP; NewRemote refuses it for a
// registry that is not on loopback.
func WithInsecure(insecure bool) Option { return func(c *config) { c.insecure = insecure } }

// WithKeychain sets the credentials; anonymous access when absent.
func WithKeychain(k authn.Keychain) Option { return func(c *config) { c.keychain = k } }

// WithTransport carries the requests (an egress guard's transport, a
// counting one); remote.DefaultTransport when absent.
func WithTransport(t http.RoundTripper) Option { return func(c *config) { c.transport = t } }

// ParseURL splits "oci://<registry>/<repository>[:<tag>|@<digest>]" into
// the repository and, when the URL names one, its tag or digest.
func ParseURL(rawURL string, insecure bool) (name.Repository, name.Reference, error) {
	rest, ok := strings.CutPrefix(rawURL, gitopsv1alpha1.OCIScheme)
	if !ok || rest == "" {
		return name.Repository{}, nil, fmt.Errorf("%q: want oci://<registry>/<repository>", rawURL)
	}
	opts := []name.Option{name.StrictValidation}
	if insecure {
		opts = append(opts, name.Insecure)
	}
	if !strings.Contains(rest, "/") {
		return name.Repository{}, nil, fmt.Errorf("%q: want oci://<registry>/<repository>, with the registry's host", rawURL)
	}
	last := rest[strings.LastIndex(rest, "/")+1:]
	if strings.ContainsAny(last, ":@") {
		ref, err := name.ParseReference(rest, opts...)
		if err != nil {
			return name.Repository{}, nil, fmt.Errorf("%q: %w", rawURL, err)
		}
		return ref.Context(), ref, nil
	}
	repo, err := name.NewRepository(rest, opts...)
	if err != nil {
		return name.Repository{}, nil, fmt.Errorf("%q: %w", rawURL, err)
	}
	return repo, nil, nil
}

// NewRemote returns the Remote of rawURL, "oci://<registry>/<repository>"
// (a tag or digest in the URL is refused: the ref says which).
func NewRemote(rawURL string, opts ...Option) (*Remote, error) {
	repo, ref, err := ParseURL(rawURL, false)
	if err != nil {
		return nil, err
	}
	if ref != nil {
		return nil, fmt.Errorf("%q names %s; put it in spec.ref, not in the URL", rawURL, ref.Identifier())
	}
	return NewRemoteOf(repo, opts...)
}

// NewRemoteOf returns the Remote of repo.
func NewRemoteOf(repo name.Repository, opts ...Option) (*Remote, error) {
	c := config{keychain: authn.NewMultiKeychain(), transport: remote.DefaultTransport}
	for _, o := range opts {
		o(&c)
	}
	if c.insecure {
		if !IsLoopback(repo.RegistryStr()) {
			return nil, fmt.Errorf("insecure: plain HTTP is allowed only for a loopback registry (localhost, 127.0.0.0/8, ::1), not %s", repo.RegistryStr())
		}
		var err error
		if repo, err = name.NewRepository(repo.Name(), name.StrictValidation, name.Insecure); err != nil {
			return nil, err
		}
	}
	return &Remote{
		repo: repo,
		url:  gitopsv1alpha1.OCIScheme + repo.Name(),
		opts: []remote.Option{
			remote.WithAuthFromKeychain(c.keychain),
			remote.WithTransport(schemeGuard{inner: c.transport, allowHTTP: c.insecure}),
			remote.WithUserAgent("charter"),
		},
	}, nil
}

// IsLoopback reports whether host (with or without a port) is localhost or
// a loopback address.
func IsLoopback(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// schemeGuard refuses plain HTTP unless it is allowed: go-containerregistry
// tries HTTP by itself for registries on private and loopback addresses,
// which would send credentials and take artifacts in clear.
type schemeGuard struct {
	inner     http.RoundTripper
	allowHTTP bool
}

func (g schemeGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !g.allowHTTP {
		return nil, fmt.Errorf("refusing plain %s to %s: only a loopback registry with spec.insecure may be read without TLS", req.URL.Scheme, req.URL.Host)
	}
	return g.inner.RoundTrip(req)
}

// String is the repository's URL, oci://<registry>/<repository>.
func (r *Remote) String() string { return r.url }

// Repository is the repository.
func (r *Remote) Repository() name.Repository { return r.repo }

func (r *Remote) options(ctx context.Context) []remote.Option {
	return append([]remote.Option{remote.WithContext(ctx)}, r.opts...)
}

func (r *Remote) fail(op string, err error) error {
	e := &Error{Op: op, URL: r.url, Err: err}
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch terr.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			e.Auth = true
			e.Err = fmt.Errorf("the registry refused access (%d): set spec.secretRef, or imagePullSecrets on the ServiceAccount, to a docker config that may read it", terr.StatusCode)
		case http.StatusNotFound:
			e.NotFound = true
		}
	}
	return e
}

// Resolve asks the registry which manifest ref names now, with a HEAD
// request (a tag list first for a semver range): no manifest body and no
// layer is downloaded.
func (r *Remote) Resolve(ctx context.Context, ref Ref) (Revision, error) {
	tag := ref.Tag
	switch {
	case ref.Digest != "":
		d := r.repo.Digest(ref.Digest)
		desc, err := remote.Head(d, r.options(ctx)...)
		if err != nil {
			return Revision{}, r.fail("resolve "+ref.String()+" in", err)
		}
		if desc.Digest.String() != ref.Digest {
			return Revision{}, &Error{Op: "resolve " + ref.String() + " in", URL: r.url, Err: fmt.Errorf("the registry answered with digest %s", desc.Digest)}
		}
		return Revision{Digest: ref.Digest}, nil
	case ref.SemVer != "":
		tags, err := remote.List(r.repo, r.options(ctx)...)
		if err != nil {
			return Revision{}, r.fail("list tags of", err)
		}
		if tag, err = highestMatching(ref.SemVer, tags); err != nil {
			return Revision{}, &Error{Op: "resolve " + ref.String() + " in", URL: r.url, Err: err, NotFound: true}
		}
	}
	desc, err := remote.Head(r.repo.Tag(tag), r.options(ctx)...)
	if err != nil {
		return Revision{}, r.fail(fmt.Sprintf("resolve tag %q in", tag), err)
	}
	return Revision{Tag: tag, Digest: desc.Digest.String()}, nil
}

// Artifact is a pulled artifact's manifest annotations.
type Artifact struct {
	Annotations map[string]string
}

// Pull fetches the artifact rev names by its digest (never by tag: a tag
// moved since Resolve cannot swap what is extracted) and extracts its
// tarball into dir, within limits. The manifest's and the layer's digests
// are checked as they are read.
func (r *Remote) Pull(ctx context.Context, rev Revision, dir string, limits source.Limits) (*Artifact, error) {
	d := r.repo.Digest(rev.Digest)
	desc, err := remote.Get(d, r.options(ctx)...)
	if err != nil {
		return nil, r.fail("pull "+rev.String()+" from", err)
	}
	if len(desc.Manifest) > maxManifestBytes {
		return nil, &ArtifactError{Digest: rev.Digest, Msg: fmt.Sprintf("manifest of %d bytes, over %d", len(desc.Manifest), maxManifestBytes)}
	}
	layer, err := r.fluxLayer(rev, desc)
	if err != nil {
		return nil, err
	}
	if limits.MaxSize > 0 && layer.Size > limits.MaxSize {
		return nil, &source.LimitError{What: "bytes", Limit: limits.MaxSize, Found: layer.Size}
	}
	l, err := remote.Layer(r.repo.Digest(layer.Digest.String()), r.options(ctx)...)
	if err != nil {
		return nil, r.fail("pull "+rev.String()+" from", err)
	}
	blob, err := l.Compressed()
	if err != nil {
		return nil, r.fail("pull "+rev.String()+" from", err)
	}
	defer blob.Close()
	if err := Extract(blob, dir, limits); err != nil {
		var aerr *ArtifactError
		if errors.As(err, &aerr) {
			aerr.Digest = rev.Digest
		}
		return nil, err
	}
	// Read the blob to its end: its digest is checked there.
	if _, err := io.Copy(io.Discard, blob); err != nil {
		return nil, r.fail("pull "+rev.String()+" from", err)
	}
	m, _ := v1.ParseManifest(strings.NewReader(string(desc.Manifest)))
	return &Artifact{Annotations: m.Annotations}, nil
}

// fluxLayer returns the one content layer of a manifest in Flux's format.
func (r *Remote) fluxLayer(rev Revision, desc *remote.Descriptor) (v1.Descriptor, error) {
	invalid := func(format string, args ...any) error {
		return &ArtifactError{Digest: rev.Digest, Msg: fmt.Sprintf(format, args...)}
	}
	switch desc.MediaType {
	case types.OCIManifestSchema1, types.DockerManifestSchema2:
	default:
		return v1.Descriptor{}, invalid("a %s, not an image manifest in Flux's artifact format", desc.MediaType)
	}
	m, err := v1.ParseManifest(strings.NewReader(string(desc.Manifest)))
	if err != nil {
		return v1.Descriptor{}, invalid("manifest: %v", err)
	}
	if m.Config.MediaType != ConfigMediaType {
		return v1.Descriptor{}, invalid("config media type %q, not Flux's %q: push it with charter push or flux push artifact", m.Config.MediaType, ConfigMediaType)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != ContentMediaType {
		var got []string
		for _, l := range m.Layers {
			got = append(got, string(l.MediaType))
		}
		return v1.Descriptor{}, invalid("want one layer of media type %q, found [%s]", ContentMediaType, strings.Join(got, ", "))
	}
	return m.Layers[0], nil
}
