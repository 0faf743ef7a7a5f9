package source

import (
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-billy/v5"
)

// boundedFS is the folder a clone writes into, counting what it writes
// against the Limits as it goes: a repository far over them fails within
// one write of the limit instead of filling charter's disk first, which is
// all a check of the finished checkout could do. Limits.check still judges
// the finished checkout; this only stops a clone early.
type boundedFS struct {
	billy.Filesystem
	tally *writeTally
	// gitDir is true below .git, whose files are not work-tree files.
	gitDir bool
}

// writeTally is shared by a clone's work tree and its .git folder.
type writeTally struct {
	limits       Limits
	mu           sync.Mutex
	bytes, files int64
}

// newBoundedFS returns fs bounded by limits; zero limits bound nothing.
func newBoundedFS(fs billy.Filesystem, limits Limits) *boundedFS {
	return &boundedFS{Filesystem: fs, tally: &writeTally{limits: limits}}
}

func (t *writeTally) wrote(n int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.bytes += int64(n)
	if t.limits.MaxSize > 0 && t.bytes > t.limits.MaxSize {
		return &LimitError{What: "bytes", Limit: t.limits.MaxSize, Found: t.bytes}
	}
	return nil
}

func (t *writeTally) created() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.files++
	if t.limits.MaxFiles > 0 && t.files > int64(t.limits.MaxFiles) {
		return &LimitError{What: "files", Limit: int64(t.limits.MaxFiles), Found: t.files}
	}
	return nil
}

func (fs *boundedFS) Create(name string) (billy.File, error) {
	return fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

func (fs *boundedFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	if flag&os.O_CREATE != 0 && !fs.gitDir && !isGitPath(name) {
		if _, err := fs.Stat(name); os.IsNotExist(err) {
			if err := fs.tally.created(); err != nil {
				return nil, err
			}
		}
	}
	f, err := fs.Filesystem.OpenFile(name, flag, perm)
	if err != nil || flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return f, err
	}
	return &boundedFile{File: f, tally: fs.tally}, nil
}

func (fs *boundedFS) TempFile(dir, prefix string) (billy.File, error) {
	f, err := fs.Filesystem.TempFile(dir, prefix)
	if err != nil {
		return nil, err
	}
	return &boundedFile{File: f, tally: fs.tally}, nil
}

func (fs *boundedFS) Chroot(path string) (billy.Filesystem, error) {
	sub, err := fs.Filesystem.Chroot(path)
	if err != nil {
		return nil, err
	}
	return &boundedFS{Filesystem: sub, tally: fs.tally, gitDir: fs.gitDir || isGitPath(path)}, nil
}

// Chmod is passed on: go-git makes its pack files read-only through it.
func (fs *boundedFS) Chmod(name string, mode os.FileMode) error {
	if c, ok := fs.Filesystem.(billy.Chmod); ok {
		return c.Chmod(name, mode)
	}
	return nil
}

func isGitPath(name string) bool {
	first, _, _ := strings.Cut(filepath.ToSlash(filepath.Clean(name)), "/")
	return first == ".git"
}

// boundedFile counts the bytes written through it.
type boundedFile struct {
	billy.File
	tally *writeTally
}

func (f *boundedFile) Write(p []byte) (int, error) {
	if err := f.tally.wrote(len(p)); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}
