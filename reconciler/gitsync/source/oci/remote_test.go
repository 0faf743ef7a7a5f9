package oci

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/charter-dev/charter/internal/imagetest"
	"github.com/charter-dev/charter/reconciler/gitsync/source"
)

// pushFolder archives files as a Flux artifact and pushes it under tag.
func pushFolder(t *testing.T, r *Remote, tag string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, body := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := Archive(dir)
	if err != nil {
		t.Fatal(err)
	}
	img, err := Image(data, map[string]string{AnnotationSource: "https://git.example.com/policies", AnnotationRevision: "main@sha1:abc"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.Push(context.Background(), tag, img)
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func newTestRemote(t *testing.T, reg *imagetest.Registry, repo string) *Remote {
	t.Helper()
	r, err := NewRemote("oci://"+reg.Host+"/"+repo, WithInsecure(true))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestResolveAndPull: tags, semver ranges and digests resolve to the
// digest pushed; the pull of a digest extracts its tree, even once the tag
// has moved on (the tag race).
func TestResolveAndPull(t *testing.T) {
	ctx := context.Background()
	reg := imagetest.NewRegistry(t)
	r := newTestRemote(t, reg, "team/policies")
	v1 := pushFolder(t, r, "v1.0.0", map[string]string{"policies/a.yaml": "a: 1\n"})
	v11 := pushFolder(t, r, "v1.1.0", map[string]string{"policies/a.yaml": "a: 2\n", "b.yaml": "b\n"})
	pushFolder(t, r, "v2.0.0", map[string]string{"policies/a.yaml": "a: 3\n"})
	pushFolder(t, r, "not-a-version", map[string]string{"x": "x"})

	tests := []struct {
		ref  Ref
		want Revision
	}{
		{Ref{Tag: "v1.0.0"}, Revision{Tag: "v1.0.0", Digest: v1}},
		{Ref{SemVer: "~1.0"}, Revision{Tag: "v1.0.0", Digest: v1}},
		{Ref{SemVer: ">=1.0.0 <2.0.0"}, Revision{Tag: "v1.1.0", Digest: v11}},
		{Ref{Digest: v11}, Revision{Digest: v11}},
	}
	for _, tt := range tests {
		got, err := r.Resolve(ctx, tt.ref)
		if err != nil || got != tt.want {
			t.Errorf("Resolve(%s) = %v, %v; want %v", tt.ref, got, err, tt.want)
		}
	}
	if got := (Revision{Tag: "v1.0.0", Digest: v1}).String(); got != "v1.0.0@"+v1 {
		t.Errorf("revision string %q", got)
	}

	rev, err := r.Resolve(ctx, Ref{Tag: "v1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	// The tag moves after the resolve: the pull still gets what was
	// resolved.
	pushFolder(t, r, "v1.0.0", map[string]string{"policies/a.yaml": "a: moved\n"})
	dir := t.TempDir()
	art, err := r.Pull(ctx, rev, dir, source.Limits{MaxSize: 1 << 20, MaxFiles: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "policies", "a.yaml")); string(got) != "a: 1\n" {
		t.Errorf("pulled %q, want the resolved revision's a: 1", got)
	}
	if art.Annotations[AnnotationSource] != "https://git.example.com/policies" {
		t.Errorf("annotations %v", art.Annotations)
	}

	for _, ref := range []Ref{{Tag: "missing"}, {SemVer: ">=9"}, {Digest: "sha256:" + strings.Repeat("0", 64)}} {
		_, err := r.Resolve(ctx, ref)
		var oerr *Error
		if !errors.As(err, &oerr) || !oerr.NotFound {
			t.Errorf("Resolve(%s): %v, want a not-found Error", ref, err)
		}
	}
}

// TestPullRefusesOtherArtifacts: an image that is not in Flux's format is
// refused, naming what it is; the layer limit is checked before the
// layer is fetched.
func TestPullRefusesOtherArtifacts(t *testing.T) {
	ctx := context.Background()
	reg := imagetest.NewRegistry(t)
	r := newTestRemote(t, reg, "team/policies")
	img := reg.Push(t, "team/policies", "container")
	_, err := r.Pull(ctx, Revision{Tag: "container", Digest: img.Digest}, t.TempDir(), source.Limits{})
	var aerr *ArtifactError
	if !errors.As(err, &aerr) || !strings.Contains(err.Error(), "not Flux's") {
		t.Errorf("pulling a container image: %v, want an ArtifactError about the config media type", err)
	}

	big := pushFolder(t, r, "big", map[string]string{"big.yaml": strings.Repeat("x: y\n", 1<<12)})
	_, err = r.Pull(ctx, Revision{Tag: "big", Digest: big}, t.TempDir(), source.Limits{MaxSize: 16})
	var lerr *source.LimitError
	if !errors.As(err, &lerr) {
		t.Errorf("pulling over the size limit: %v, want a LimitError", err)
	}

	// Two layers: not Flux's format either.
	two, _ := random.Image(64, 2)
	ref, _ := name.ParseReference(reg.Host + "/team/policies:two")
	if err := remote.Write(ref, two); err != nil {
		t.Fatal(err)
	}
	d, _ := two.Digest()
	if _, err := r.Pull(ctx, Revision{Digest: d.String()}, t.TempDir(), source.Limits{}); !errors.As(err, &aerr) {
		t.Errorf("pulling a two-layer image: %v, want an ArtifactError", err)
	}
}

// TestPlainHTTPOnlyWhenAskedAndOnLoopback: without insecure a registry
// that speaks only HTTP is not read (go-containerregistry would fall back
// to HTTP for it by itself); insecure is refused for a registry that is
// not on loopback.
func TestPlainHTTPOnlyWhenAskedAndOnLoopback(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	secure, err := NewRemote("oci://" + reg.Host + "/team/policies")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := secure.Resolve(context.Background(), Ref{Tag: "latest"}); err == nil || !strings.Contains(err.Error(), "refusing plain http") {
		t.Errorf("resolving over plain HTTP without insecure: %v, want a refusal", err)
	}
	for _, host := range []string{"registry.example.com", "10.0.0.5:5000", "192.168.1.1"} {
		if _, err := NewRemote("oci://"+host+"/team/policies", WithInsecure(true)); err == nil || !strings.Contains(err.Error(), "only for a loopback registry") {
			t.Errorf("insecure %s: %v, want a refusal", host, err)
		}
	}
	for _, host := range []string{"localhost:5000", "127.0.0.1:5000", "[::1]:5000"} {
		if _, err := NewRemote("oci://"+host+"/team/policies", WithInsecure(true)); err != nil {
			t.Errorf("insecure %s: %v", host, err)
		}
	}
}

func TestParseURL(t *testing.T) {
	tests := []struct {
		url, repo, ref, err string
	}{
		{url: "oci://ghcr.io/org/policies", repo: "ghcr.io/org/policies"},
		{url: "oci://ghcr.io/org/policies:v1", repo: "ghcr.io/org/policies", ref: "v1"},
		{url: "oci://localhost:5000/policies:v1", repo: "localhost:5000/policies", ref: "v1"},
		{url: "oci://localhost:5000/policies", repo: "localhost:5000/policies"},
		{url: "https://ghcr.io/org/policies", err: "want oci://"},
		{url: "oci://policies", err: "with the registry's host"},
	}
	for _, tt := range tests {
		repo, ref, err := ParseURL(tt.url, false)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseURL(%q): %v, want %q", tt.url, err, tt.err)
			}
			continue
		}
		if err != nil || repo.Name() != tt.repo || (ref != nil) != (tt.ref != "") || ref != nil && ref.Identifier() != tt.ref {
			t.Errorf("ParseURL(%q) = %v, %v, %v", tt.url, repo, ref, err)
		}
	}
	if _, err := NewRemote("oci://ghcr.io/org/policies:v1"); err == nil || !strings.Contains(err.Error(), "spec.ref") {
		t.Errorf("NewRemote with a tag in the URL: %v", err)
	}
}

// countingTransport counts the requests that download a blob or a
// manifest body.
type countingTransport struct {
	inner                  http.RoundTripper
	blobGets, manifestGets int
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
		c.blobGets++
	}
	if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/manifests/") {
		c.manifestGets++
	}
	return c.inner.RoundTrip(req)
}

// TestResolveDownloadsNothing: polling a tag (HEAD) reads no manifest and
// no layer, however often: an unchanged artifact costs zero layer bytes.
func TestResolveDownloadsNothing(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	pushFolder(t, newTestRemote(t, reg, "team/policies"), "latest", map[string]string{"a.yaml": "a: 1\n"})
	counter := &countingTransport{inner: remote.DefaultTransport}
	r, err := NewRemote("oci://"+reg.Host+"/team/policies", WithInsecure(true), WithTransport(counter))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := r.Resolve(context.Background(), Ref{Tag: "latest"}); err != nil {
			t.Fatal(err)
		}
	}
	if counter.blobGets != 0 || counter.manifestGets != 0 {
		t.Errorf("three polls downloaded %d blobs and %d manifests, want none", counter.blobGets, counter.manifestGets)
	}
}
