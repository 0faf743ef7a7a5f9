package gitsync

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/charter-dev/charter/reconciler/gitsync/internal/gitserver"
)

// gitRepo is a real Git repository on disk that a test commits to.
type gitRepo struct {
	t    *testing.T
	dir  string
	repo *git.Repository
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	dir, repo := gitserver.InitRepo(t)
	return &gitRepo{t: t, dir: dir, repo: repo}
}

func (g *gitRepo) fileURL() string { return "file://" + g.dir }

// write stages files (path → content); an empty content removes the file.
func (g *gitRepo) write(files map[string]string) {
	g.t.Helper()
	wt, err := g.repo.Worktree()
	if err != nil {
		g.t.Fatal(err)
	}
	for name, content := range files {
		p := filepath.Join(g.dir, name)
		if content == "" {
			if _, err := wt.Remove(name); err != nil {
				g.t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			g.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			g.t.Fatal(err)
		}
		if _, err := wt.Add(name); err != nil {
			g.t.Fatal(err)
		}
	}
}

// commit commits files, signed by key when it is not nil, and returns the
// revision string the reconciler reports for branch main.
func (g *gitRepo) commit(files map[string]string, key *openpgp.Entity) string {
	g.t.Helper()
	g.write(files)
	wt, err := g.repo.Worktree()
	if err != nil {
		g.t.Fatal(err)
	}
	hash, err := wt.Commit(fmt.Sprintf("change %d files", len(files)), &git.CommitOptions{
		Author:  &object.Signature{Name: "test", Email: "test@example.com", When: time.Now()},
		SignKey: key,
	})
	if err != nil {
		g.t.Fatal(err)
	}
	return "main@sha1:" + hash.String()
}

// tag creates a lightweight tag at HEAD.
func (g *gitRepo) tag(name string) {
	g.t.Helper()
	head, err := g.repo.Head()
	if err != nil {
		g.t.Fatal(err)
	}
	if _, err := g.repo.CreateTag(name, head.Hash(), nil); err != nil {
		g.t.Fatal(err)
	}
}

// policy is a valid ClusterPolicy requiring a label.
func policy(name, label string) string {
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: %s
spec:
  background: false
  rules:
  - name: require-%s
    match:
      any:
      - resources:
          kinds: [Pod]
    validate:
      failureAction: Audit
      message: "label %s is required"
      pattern:
        metadata:
          labels:
            %s: "?*"
`, name, label, label, label)
}

// brokenPolicy has no rules, which the kind table's check (policycheck.Object) refuses.
func brokenPolicy(name string) string {
	return fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: %s
spec:
  rules: []
`, name)
}

// httpGit is a Git server over smart HTTP.
type httpGit struct {
	// URL is the base URL; a repository is at URL + "/" + its folder.
	URL string
	// CA is the server's CA certificate (PEM).
	CA []byte
	// refLists counts ref advertisements (GET info/refs), what ls-remote
	// and the start of a clone ask; uploadPacks counts pack requests (POST
	// git-upload-pack), what only a clone or fetch asks.
	refLists, uploadPacks atomic.Int32
}

// httpGitServer serves the repositories under root over smart HTTP,
// through git http-backend, on TLS, to clients presenting user and
// password (basic auth) or password as a bearer token.
func httpGitServer(t *testing.T, root, user, password string) *httpGit {
	t.Helper()
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("git http-backend not found at %s: install git", backend)
	}
	cgiHandler := &cgi.Handler{
		Path: backend,
		Root: "/git",
		Env: []string{
			"GIT_PROJECT_ROOT=" + root,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_GLOBAL=" + os.DevNull,
			"GIT_CONFIG_NOSYSTEM=true",
		},
	}
	hg := &httpGit{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		bearer := r.Header.Get("Authorization") == "Bearer "+password
		if !bearer && (!ok || u != user || p != password) {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		switch {
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs"):
			hg.refLists.Add(1)
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack"):
			hg.uploadPacks.Add(1)
		}
		cgiHandler.ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	hg.URL = srv.URL + "/git"
	hg.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return hg
}

// newSigningKey returns an OpenPGP key and its armored public key.
func newSigningKey(t *testing.T) (*openpgp.Entity, []byte) {
	t.Helper()
	key, err := openpgp.NewEntity("charter test", "", "signer@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := key.Serialize(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return key, buf.Bytes()
}
