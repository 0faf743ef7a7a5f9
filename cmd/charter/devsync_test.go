package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// runGit runs git in dir with no user or system configuration.
func runGit(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=true",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// `charter dev` run from a linked worktree (`git worktree add`) syncs the
// worktree's branch: HEAD is read through the main repository, and the
// URL gitsync fetches is the main repository's Git folder, where the
// branch lives.
func TestResolveDevSourceLinkedWorktree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	base := t.TempDir()
	main := filepath.Join(base, "main")
	if err := os.MkdirAll(filepath.Join(main, "policies"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(main, "policies", "p.yaml"), []byte("kind: ClusterPolicy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, main, "init", "-q", "-b", "main")
	runGit(t, main, "add", "policies")
	runGit(t, main, "commit", "-qm", "first")
	wt := filepath.Join(base, "wt-feature")
	runGit(t, main, "worktree", "add", "-q", wt, "-b", "feature")

	src, err := resolveDevSource(devOptions{repo: filepath.Join(wt, "policies"), path: "policies"})
	if err != nil {
		t.Fatalf("resolveDevSource in a linked worktree: %v", err)
	}
	if src.branch != "feature" || src.dir != wt {
		t.Errorf("source %+v, want branch feature in %s", src, wt)
	}
	if want := "file://" + filepath.Join(main, ".git"); src.url() != want {
		t.Errorf("url %s, want %s", src.url(), want)
	}
	// What gitsync does with the URL: clone the branch.
	clone, err := git.PlainClone(t.TempDir(), false, &git.CloneOptions{URL: src.url(),
		ReferenceName: plumbing.NewBranchReferenceName(src.branch), SingleBranch: true})
	if err != nil {
		t.Fatalf("cloning %s: %v", src.url(), err)
	}
	if _, err := clone.Head(); err != nil {
		t.Fatal(err)
	}
	w := &branchWatcher{dir: src.dir, branch: src.branch}
	if rev, err := w.head(); err != nil || rev == "" {
		t.Errorf("branch watcher head = %q, %v", rev, err)
	}

	// A plain checkout keeps its own folder as the URL.
	plain, err := resolveDevSource(devOptions{repo: main, path: "policies"})
	if err != nil {
		t.Fatal(err)
	}
	if plain.branch != "main" || plain.url() != "file://"+main {
		t.Errorf("plain checkout source %+v, url %s", plain, plain.url())
	}
}
