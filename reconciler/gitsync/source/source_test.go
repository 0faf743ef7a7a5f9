package source

import (
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	. "github.com/onsi/gomega"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
)

const (
	h1 = "1111111111111111111111111111111111111111"
	h2 = "2222222222222222222222222222222222222222"
	h3 = "3333333333333333333333333333333333333333"
	h4 = "4444444444444444444444444444444444444444"
)

func advertised() []*plumbing.Reference {
	return []*plumbing.Reference{
		plumbing.NewSymbolicReference(plumbing.HEAD, "refs/heads/main"),
		plumbing.NewHashReference("refs/heads/main", plumbing.NewHash(h1)),
		plumbing.NewHashReference("refs/heads/dev", plumbing.NewHash(h2)),
		plumbing.NewHashReference("refs/tags/v1.0.0", plumbing.NewHash(h3)),
		plumbing.NewHashReference("refs/tags/v1.2.0", plumbing.NewHash(h4)),
		// v1.2.0 is annotated: the peeled entry is the commit.
		plumbing.NewHashReference("refs/tags/v1.2.0^{}", plumbing.NewHash(h2)),
		plumbing.NewHashReference("refs/tags/v2.0.0", plumbing.NewHash(h1)),
	}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name string
		ref  *gitopsv1alpha1.GitRef
		want string
		err  string
	}{
		{name: "default branch from HEAD", want: "main@sha1:" + h1},
		{name: "branch", ref: &gitopsv1alpha1.GitRef{Branch: "dev"}, want: "dev@sha1:" + h2},
		{name: "tag beats branch", ref: &gitopsv1alpha1.GitRef{Branch: "dev", Tag: "v1.0.0"}, want: "v1.0.0@sha1:" + h3},
		{name: "annotated tag is peeled", ref: &gitopsv1alpha1.GitRef{Tag: "v1.2.0"}, want: "v1.2.0@sha1:" + h2},
		{name: "semver beats tag", ref: &gitopsv1alpha1.GitRef{Tag: "v1.0.0", SemVer: "<2.0.0"}, want: "v1.2.0@sha1:" + h2},
		{name: "commit beats everything", ref: &gitopsv1alpha1.GitRef{Commit: h4, SemVer: "*", Tag: "v1.0.0"}, want: "sha1:" + h4},
		{name: "commit on a branch", ref: &gitopsv1alpha1.GitRef{Commit: h4, Branch: "dev"}, want: "dev@sha1:" + h4},
		{name: "missing branch", ref: &gitopsv1alpha1.GitRef{Branch: "nope"}, err: `branch "nope" not found`},
		{name: "no semver match", ref: &gitopsv1alpha1.GitRef{SemVer: ">=3"}, err: `no tag matches semver ">=3"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			rev, err := resolve(RefFrom(tt.ref), advertised())
			if tt.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rev.String()).To(Equal(tt.want))
		})
	}
}

func TestNewAuth(t *testing.T) {
	tests := []struct {
		name string
		url  string
		data map[string][]byte
		err  string
	}{
		{name: "public https", url: "https://example.com/r.git"},
		{name: "basic auth over https", url: "https://example.com/r.git", data: map[string][]byte{"username": []byte("u"), "password": []byte("p")}},
		{name: "credentials over plain http", url: "http://example.com/r.git", data: map[string][]byte{"password": []byte("p")}, err: "plain http"},
		{name: "token and password", url: "https://example.com/r.git", data: map[string][]byte{"bearerToken": []byte("t"), "password": []byte("p")}, err: "keep one"},
		{name: "ssh without known_hosts", url: "ssh://git@example.com/r.git", data: map[string][]byte{"identity": []byte("k")}, err: "host keys are always checked"},
		{name: "scp-style is ssh", url: "git@example.com:org/r.git", err: "known_hosts"},
		{name: "file takes no credentials", url: "file:///tmp/r", data: map[string][]byte{"password": []byte("p")}, err: "no credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := NewAuth(tt.url, tt.data)
			if tt.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
			}
		})
	}
}

func TestErrorsNeverCarrySecrets(t *testing.T) {
	g := NewWithT(t)
	auth, err := NewAuth("https://example.com/r.git", map[string][]byte{"username": []byte("u"), "password": []byte("hunter2-secret")})
	g.Expect(err).NotTo(HaveOccurred())
	msg := auth.sanitize(`Get "https://u:hunter2-secret@example.com/r.git/info/refs": password hunter2-secret rejected`)
	g.Expect(msg).NotTo(ContainSubstring("hunter2-secret"))
	g.Expect(msg).To(ContainSubstring("https://example.com/r.git/info/refs"))
	g.Expect(SanitizeURL("https://user:pass@example.com/x")).To(Equal("https://example.com/x"))
	g.Expect(strings.Contains(SanitizeURL("ssh://git@example.com/x"), "git@")).To(BeFalse())
}
