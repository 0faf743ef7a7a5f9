package gitserver

import (
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// InitRepo creates an empty repository whose default branch is main in a
// folder of the test's, for tests that commit to it and serve it.
func InitRepo(t testing.TB) (dir string, repo *git.Repository) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "repo")
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	check(t, err)
	return dir, repo
}
