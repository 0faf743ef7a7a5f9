// Package workdir tells a temporary work folder in use from one left
// behind by a killed process: the process that uses a folder holds a lock
// (flock) on a file in it, which the kernel drops when the process dies,
// however it dies (SIGKILL included), so the next process to start can
// remove what the killed one could not.
package workdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// LockFile, in a work folder, is locked (flock) by the process that
// uses the folder for as long as it runs. The kernel drops the lock when
// that process dies, however it dies, so a work folder whose lock file is
// there but not locked belongs to a process that never cleaned up. A
// folder kept on purpose has no lock file.
const LockFile = "owner.lock"

// RemoveStaleMatching removes the folders in parent (the temporary folder
// when empty) matching pattern (filepath.Match) for which stale says true,
// and returns their paths. what names such a folder in errors ("work
// folder"). Every kind of work folder charter leaves behind is swept the
// same way; only how a stale one is told apart differs.
func RemoveStaleMatching(parent, pattern, what string, stale func(dir string) (bool, error)) ([]string, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	dirs, err := filepath.Glob(filepath.Join(parent, pattern))
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, dir := range dirs {
		isStale, err := stale(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !isStale {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("removing the stale %s %s: %w", what, dir, err))
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}
