package source

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charter-dev/charter/reconciler/gitsync/internal/gitserver"
)

// A revision over a limit stalls with this message on the tenant's
// PolicyRepository: it must say which setting an administrator raises.
func TestLimitErrorNamesItsSetting(t *testing.T) {
	tests := []struct {
		name   string
		limits Limits
		files  int
		want   string
	}{
		{"bytes", Limits{MaxSize: 10}, 1, "charter serve --gitsync-max-repository-size (Helm value gitsyncController.maxRepositorySize)"},
		{"files", Limits{MaxFiles: 2}, 3, "charter serve --gitsync-max-files (Helm value gitsyncController.maxFiles)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for i := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, string(rune('a'+i))+".yaml"), []byte(strings.Repeat("x", 20)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := tt.limits.check(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want it to name %q", err, tt.want)
			}
		})
	}
}

// A repository far over the limits fails while it is cloned, within one
// write of the limit, not after all of it reached the disk; one within
// them checks out as before. Nothing of a refused clone stays in the cache.
func TestCloneStopsAtTheLimit(t *testing.T) {
	const big = 4 << 20
	tests := []struct {
		name   string
		files  int
		size   int
		limits Limits
		what   string
		atMost int64
	}{
		{name: "bytes", files: 1, size: big, limits: Limits{MaxSize: 256 << 10}, what: "bytes", atMost: 1 << 20},
		{name: "files", files: 40, size: 10, limits: Limits{MaxFiles: 10}, what: "files", atMost: 11},
		{name: "within", files: 5, size: 10 << 10, limits: Limits{MaxSize: 1 << 20, MaxFiles: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := newRemote(t)
			wt, err := src.repo.Worktree()
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.files {
				name := fmt.Sprintf("f%03d.bin", i)
				body := make([]byte, tt.size)
				_, _ = rand.Read(body) // incompressible: the pack is as large as the files
				if err := os.WriteFile(filepath.Join(src.dir, name), body, 0o644); err != nil {
					t.Fatal(err)
				}
				if _, err := wt.Add(name); err != nil {
					t.Fatal(err)
				}
			}
			src.commit("with the files")
			// Over SSH, as from a tenant's remote: go-git's file:// transport
			// waits for a git-upload-pack that a refused clone stopped reading.
			srv := gitserver.StartSSH(t, filepath.Dir(src.dir))
			url := srv.URL(filepath.Base(src.dir))
			auth, err := NewAuth(url, map[string][]byte{KeyIdentity: srv.Identity, KeyKnownHosts: srv.KnownHosts("ssh-ed25519")})
			if err != nil {
				t.Fatal(err)
			}
			rev, err := LsRemote(t.Context(), url, RefFrom(nil), auth)
			if err != nil {
				t.Fatal(err)
			}
			cache := &Cache{Dir: t.TempDir(), Limits: tt.limits}
			_, _, err = cache.Checkout(t.Context(), "ns/repo", url, rev, auth)
			if tt.what == "" {
				if err != nil {
					t.Fatalf("a checkout within the limits: %v", err)
				}
				return
			}
			var lerr *LimitError
			if !errors.As(err, &lerr) || lerr.What != tt.what {
				t.Fatalf("got %v, want a LimitError on %s", err, tt.what)
			}
			if lerr.Found > tt.atMost {
				t.Errorf("the clone wrote %d %s before it stopped, want at most %d: it was not stopped while cloning", lerr.Found, tt.what, tt.atMost)
			}
			entries, _ := os.ReadDir(filepath.Join(cache.Dir, "ns", "repo"))
			if len(entries) != 0 {
				t.Errorf("the refused clone left %d entries in the cache", len(entries))
			}
		})
	}
}
