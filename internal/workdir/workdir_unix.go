//go:build unix

package workdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Lock creates dir's lock file and holds its lock until the file is
// closed (or Unlock). The file is locked under another name first and
// then renamed, so RemoveStale in another process never sees it unlocked.
func Lock(dir string) (*os.File, error) {
	tmp := filepath.Join(dir, LockFile+".new")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_RDWR|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating the work folder's lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the work folder %s: %w", dir, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, LockFile)); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the work folder %s: %w", dir, err)
	}
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return f, nil
}

// Unlock releases the lock Lock took (nil: nothing to release). With
// keep, the lock file goes first, so the folder is never taken for a
// stale one.
func Unlock(f *os.File, keep bool) error {
	if f == nil {
		return nil
	}
	var errs []error
	if keep {
		// f.Name() is the name it was locked under, before the rename.
		if err := os.Remove(filepath.Join(filepath.Dir(f.Name()), LockFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, f.Close())...)
}

// RemoveStale removes the work folders in parent (the temporary folder
// when empty) matching pattern (filepath.Match) that this user's processes
// locked and left behind when they were killed before they could remove
// them, and returns their paths. Folders in use, kept on purpose (no lock
// file), or owned by another user are left alone.
func RemoveStale(parent, pattern string) ([]string, error) {
	return RemoveStaleMatching(parent, pattern, "work folder", isStaleWorkDir)
}

func isStaleWorkDir(dir string) (bool, error) {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false, nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
		return false, nil
	}
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking whether %s is in use: %w", dir, err)
	}
	defer f.Close()
	switch err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); {
	case err == nil:
		// Held until f closes, after the folder is gone: no one
		// else takes it meanwhile.
		return true, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, nil
	default:
		return false, fmt.Errorf("checking whether %s is in use: %w", dir, err)
	}
}
