package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
)

// completeMarker is written into a checkout once the clone finished, so a
// clone interrupted by a crash is never mistaken for a cached one.
const completeMarker = ".charter-checkout-complete"

// Error is a failed Git operation. Its message names the operation and the
// sanitized URL and never contains credentials; it deliberately does not
// wrap the transport's error, whose text may.
type Error struct {
	Op  string
	URL string
	Msg string
	// Auth is true when the remote refused the credentials.
	Auth bool
}

func (e *Error) Error() string { return fmt.Sprintf("%s %s: %s", e.Op, e.URL, e.Msg) }

func (a *Auth) fail(op, rawURL string, err error) error {
	e := &Error{Op: op, URL: SanitizeURL(rawURL), Msg: a.sanitize(err.Error())}
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired):
		e.Auth, e.Msg = true, "authentication required: the remote asks for credentials (set spec.secretRef)"
	case errors.Is(err, transport.ErrAuthorizationFailed):
		e.Auth, e.Msg = true, "authentication failed: the remote refused the credentials in spec.secretRef"
	case errors.Is(err, transport.ErrRepositoryNotFound):
		e.Msg = "repository not found"
	}
	return e
}

// LsRemote asks the remote which commit ref points at, without cloning.
func LsRemote(ctx context.Context, rawURL string, ref Ref, auth *Auth) (Revision, error) {
	if auth == nil {
		auth = &Auth{}
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{rawURL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{
		Auth:          auth.Method,
		CABundle:      auth.CABundle,
		PeelingOption: git.AppendPeeled,
	})
	if err != nil {
		return Revision{}, auth.fail("list refs of", rawURL, err)
	}
	rev, err := resolve(ref, refs)
	if err != nil {
		return Revision{}, &Error{Op: "resolve " + ref.String() + " in", URL: SanitizeURL(rawURL), Msg: err.Error()}
	}
	return rev, nil
}

// Cache holds one checkout per repository (key) and commit.
type Cache struct {
	// Dir is the cache's root folder.
	Dir string
	// Limits bound what one checkout may hold; zero fields bound nothing.
	Limits Limits
}

// Limits bound a checkout, as Flux's source-controller bounds its
// artifacts: a repository of a namespace's tenant must not fill the disk
// or memory of charter's gitsync.
type Limits struct {
	// MaxSize is the most bytes a checkout may hold, its Git objects
	// included.
	MaxSize int64
	// MaxFiles is the most files its work tree may hold.
	MaxFiles int
}

// LimitError is a checkout over the Limits. Nothing of it is kept.
type LimitError struct {
	What         string
	Limit, Found int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("the checkout holds more than %d %s (at least %d): over charter's limit, set by charter serve --%s (Helm value gitsyncController.%s)",
		e.Limit, e.What, e.Found, limitSetting[e.What].flag, limitSetting[e.What].helm)
}

// limitSetting names, for each kind of limit, where an administrator
// raises it, so the Stalled message a tenant reads says whom to ask for what.
var limitSetting = map[string]struct{ flag, helm string }{
	"bytes": {"gitsync-max-repository-size", "maxRepositorySize"},
	"files": {"gitsync-max-files", "maxFiles"},
}

// check measures the checkout in dir against l, stopping at the first
// limit passed.
func (l Limits) check(dir string) error {
	if l.MaxSize <= 0 && l.MaxFiles <= 0 {
		return nil
	}
	var size, files int64
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		size += info.Size()
		if l.MaxSize > 0 && size > l.MaxSize {
			return &LimitError{What: "bytes", Limit: l.MaxSize, Found: size}
		}
		if rel, _ := filepath.Rel(dir, p); !strings.HasPrefix(rel, ".git"+string(filepath.Separator)) {
			files++
			if l.MaxFiles > 0 && files > int64(l.MaxFiles) {
				return &LimitError{What: "files", Limit: int64(l.MaxFiles), Found: files}
			}
		}
		return nil
	})
}

// Checkout returns a folder holding rev's tree, cloning it unless the cache
// has it already (cached reports which). Older checkouts of the same key are
// removed once the new one is complete.
func (c *Cache) Checkout(ctx context.Context, key, rawURL string, rev Revision, auth *Auth) (dir string, cached bool, err error) {
	if auth == nil {
		auth = &Auth{}
	}
	return c.Fill(key, rev.Commit, func(tmp string) error { return clone(ctx, tmp, rawURL, rev, auth, c.Limits) })
}

// Fill returns the cache's folder of key (a repository) and id (one of
// its revisions: a commit, an artifact digest), calling fill to write it
// into a temporary folder unless the cache has it already (cached reports
// which). What fill wrote is checked against the Limits before it takes
// the folder's place; older folders of the same key are removed once the
// new one is complete. Every source (Git, OCI) fills the cache through it.
func (c *Cache) Fill(key, id string, fill func(dir string) error) (dir string, cached bool, err error) {
	parent := filepath.Join(c.Dir, filepath.FromSlash(key))
	dir = filepath.Join(parent, id)
	if _, err := os.Stat(filepath.Join(dir, completeMarker)); err == nil {
		return dir, true, nil
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", false, err
	}
	tmp, err := os.MkdirTemp(parent, ".fill-")
	if err != nil {
		return "", false, err
	}
	defer os.RemoveAll(tmp)
	if err := fill(tmp); err != nil {
		return "", false, err
	}
	if err := c.Limits.check(tmp); err != nil {
		return "", false, err
	}
	if err := os.WriteFile(filepath.Join(tmp, completeMarker), nil, 0o600); err != nil {
		return "", false, err
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", false, err
	}
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		if e.Name() != id {
			_ = os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
	return dir, false, nil
}

// clone checks rev out into dir. Branches and tags are cloned shallow (one
// commit); a pinned commit needs the history that holds it. What the clone
// writes is counted against limits as it is written (boundedFS).
func clone(ctx context.Context, dir, rawURL string, rev Revision, auth *Auth, limits Limits) error {
	opts := &git.CloneOptions{
		URL:           rawURL,
		Auth:          auth.Method,
		CABundle:      auth.CABundle,
		ReferenceName: rev.Reference,
		SingleBranch:  true,
		Tags:          git.NoTags,
	}
	if !rev.pinned {
		opts.Depth = 1
	}
	worktree := newBoundedFS(osfs.New(dir), limits)
	dotGit, err := worktree.Chroot(git.GitDirName)
	if err != nil {
		return err
	}
	repo, err := git.CloneContext(ctx, filesystem.NewStorage(dotGit, cache.NewObjectLRUDefault()), worktree, opts)
	if lerr := (*LimitError)(nil); errors.As(err, &lerr) {
		return lerr
	}
	if err != nil {
		return auth.fail("clone", rawURL, err)
	}
	head, err := repo.Head()
	if err != nil {
		return auth.fail("clone", rawURL, err)
	}
	if head.Hash().String() == rev.Commit {
		return nil
	}
	if !rev.pinned {
		// The ref moved between ls-remote and clone: the caller asked for
		// one commit and must not silently get another.
		return &Error{Op: "clone", URL: SanitizeURL(rawURL), Msg: fmt.Sprintf("%s moved from %s to %s during the fetch; retrying", rev.Name, rev.Commit, head.Hash())}
	}
	wt, err := repo.Worktree()
	if err != nil {
		return err
	}
	err = wt.Checkout(&git.CheckoutOptions{Hash: plumbing.NewHash(rev.Commit), Force: true})
	if lerr := (*LimitError)(nil); errors.As(err, &lerr) {
		return lerr
	}
	if err != nil {
		where := "the default branch"
		if rev.Name != "" {
			where = "branch " + rev.Name
		}
		return &Error{Op: "checkout", URL: SanitizeURL(rawURL), Msg: fmt.Sprintf("commit %s not found on %s", rev.Commit, where)}
	}
	return nil
}
