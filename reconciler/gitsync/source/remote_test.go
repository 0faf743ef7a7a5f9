package source

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh/knownhosts"

	gitopsv1alpha1 "github.com/charter-dev/charter/api/gitops/v1alpha1"
	"github.com/charter-dev/charter/reconciler/gitsync/internal/gitserver"
)

// remote is a real repository whose commits each write file.txt.
type remote struct {
	t    *testing.T
	dir  string
	repo *git.Repository
}

func newRemote(t *testing.T) *remote {
	t.Helper()
	dir, repo := gitserver.InitRepo(t)
	return &remote{t: t, dir: dir, repo: repo}
}

// commit writes content to file.txt on the current branch.
func (r *remote) commit(content string) string {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, "file.txt"), []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
	wt, err := r.repo.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := wt.Add("file.txt"); err != nil {
		r.t.Fatal(err)
	}
	h, err := wt.Commit(content, &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}})
	if err != nil {
		r.t.Fatal(err)
	}
	return h.String()
}

func (r *remote) branch(name string) {
	r.t.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(name), Create: true}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *remote) checkout(name string) {
	r.t.Helper()
	wt, err := r.repo.Worktree()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(name)}); err != nil {
		r.t.Fatal(err)
	}
}

// tag tags HEAD; annotated tags get a tag object.
func (r *remote) tag(name string, annotated bool) {
	r.t.Helper()
	head, err := r.repo.Head()
	if err != nil {
		r.t.Fatal(err)
	}
	var opts *git.CreateTagOptions
	if annotated {
		opts = &git.CreateTagOptions{Message: name, Tagger: &object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}}
	}
	if _, err := r.repo.CreateTag(name, head.Hash(), opts); err != nil {
		r.t.Fatal(err)
	}
}

// fetch resolves ref at url and checks it out, returning the revision and
// the content of file.txt.
func fetch(ctx context.Context, cache *Cache, url string, ref *gitopsv1alpha1.GitRef, auth *Auth) (string, string, error) {
	rev, err := LsRemote(ctx, url, RefFrom(ref), auth)
	if err != nil {
		return "", "", err
	}
	dir, _, err := cache.Checkout(ctx, "ns/repo", url, rev, auth)
	if err != nil {
		return "", "", err
	}
	b, err := os.ReadFile(filepath.Join(dir, "file.txt"))
	return rev.String(), string(b), err
}

// TestRefPrecedenceAgainstARealRemote resolves and checks out every kind
// of ref from a real repository: what is checked out is the commit the
// precedence commit > semver > tag > branch picks.
func TestRefPrecedenceAgainstARealRemote(t *testing.T) {
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	src := newRemote(t)
	c1 := src.commit("v1.0.0 on main")
	src.tag("v1.0.0", false)
	c2 := src.commit("v1.1.0 on main")
	src.tag("v1.1.0", true)
	c3 := src.commit("v2.0.0 on main")
	src.tag("v2.0.0", true)
	src.branch("dev")
	c4 := src.commit("dev tip")
	src.checkout("main")
	c5 := src.commit("main tip")

	tests := []struct {
		name    string
		ref     *gitopsv1alpha1.GitRef
		want    string
		content string
		err     string
	}{
		{name: "no ref: the default branch", want: "main@sha1:" + c5, content: "main tip"},
		{name: "branch", ref: &gitopsv1alpha1.GitRef{Branch: "dev"}, want: "dev@sha1:" + c4, content: "dev tip"},
		{name: "lightweight tag beats branch", ref: &gitopsv1alpha1.GitRef{Branch: "dev", Tag: "v1.0.0"}, want: "v1.0.0@sha1:" + c1, content: "v1.0.0 on main"},
		{name: "annotated tag checks out its commit", ref: &gitopsv1alpha1.GitRef{Tag: "v2.0.0"}, want: "v2.0.0@sha1:" + c3, content: "v2.0.0 on main"},
		{name: "semver beats tag and branch", ref: &gitopsv1alpha1.GitRef{Branch: "dev", Tag: "v2.0.0", SemVer: "~1"}, want: "v1.1.0@sha1:" + c2, content: "v1.1.0 on main"},
		{name: "commit beats semver", ref: &gitopsv1alpha1.GitRef{SemVer: ">=1", Tag: "v2.0.0", Commit: c2}, want: "sha1:" + c2, content: "v1.1.0 on main"},
		{name: "commit on a branch", ref: &gitopsv1alpha1.GitRef{Branch: "dev", Commit: c4}, want: "dev@sha1:" + c4, content: "dev tip"},
		{name: "commit not on the branch", ref: &gitopsv1alpha1.GitRef{Branch: "main", Commit: c4}, err: "commit " + c4 + " not found on branch main"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cache := &Cache{Dir: t.TempDir()}
			rev, content, err := fetch(t.Context(), cache, "file://"+src.dir, tt.ref, nil)
			if tt.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(rev).To(Equal(tt.want))
			g.Expect(content).To(Equal(tt.content))
			// Branches and tags are cloned one commit deep; a pinned
			// commit needs the history that holds it.
			dir := filepath.Join(cache.Dir, "ns", "repo", rev[strings.LastIndex(rev, ":")+1:])
			_, err = os.Stat(filepath.Join(dir, ".git", "shallow"))
			if tt.ref != nil && tt.ref.Commit != "" {
				g.Expect(err).To(MatchError(os.ErrNotExist))
			} else {
				g.Expect(err).NotTo(HaveOccurred(), "the clone is not shallow")
			}
		})
	}
}

// TestSSHChecksHostKeys fetches over SSH from a server with two host keys:
// known_hosts naming either one is enough, a wrong key or an unlisted host
// is refused before any Git traffic.
func TestSSHChecksHostKeys(t *testing.T) {
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	src := newRemote(t)
	tip := src.commit("over ssh")
	srv := gitserver.StartSSH(t, filepath.Dir(src.dir))
	url := srv.URL(filepath.Base(src.dir))
	impostor := gitserver.StartSSH(t, filepath.Dir(src.dir))

	tests := []struct {
		name       string
		knownHosts []byte
		identity   []byte
		err        string
	}{
		{name: "ed25519 host key", knownHosts: srv.KnownHosts("ssh-ed25519"), identity: srv.Identity},
		// The server prefers ed25519; only the ECDSA key is known, so the
		// client must ask for ECDSA.
		{name: "only the ECDSA host key known", knownHosts: srv.KnownHosts("ecdsa-sha2-nistp256"), identity: srv.Identity},
		{name: "another server's key under this address", knownHosts: []byte(knownhosts.Line([]string{srv.Addr}, impostor.HostKeys["ssh-ed25519"])), identity: srv.Identity, err: "key mismatch"},
		{name: "host not in known_hosts", knownHosts: impostor.KnownHosts("ssh-ed25519"), identity: srv.Identity, err: "known_hosts in the secret has no key for " + srv.Addr},
		{name: "client key not accepted", knownHosts: srv.KnownHosts("ssh-ed25519"), identity: impostor.Identity, err: "unable to authenticate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			auth, err := NewAuth(url, map[string][]byte{KeyIdentity: tt.identity, KeyKnownHosts: tt.knownHosts})
			if err == nil {
				var rev, content string
				rev, content, err = fetch(t.Context(), &Cache{Dir: t.TempDir()}, url, nil, auth)
				if tt.err == "" {
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(rev).To(Equal("main@sha1:" + tip))
					g.Expect(content).To(Equal("over ssh"))
					return
				}
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.err)))
			g.Expect(err.Error()).NotTo(ContainSubstring("PRIVATE KEY"))
		})
	}
}
