//go:build unix

package workdir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveStale removes the folders whose process
// died (lock file there, lock free) and nothing else.
func TestRemoveStale(t *testing.T) {
	parent := t.TempDir()
	mkdir := func(name string) string {
		dir := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(dir, "etcd"), 0o700); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	// A killed process: its lock file stays, its lock went with it.
	stale := mkdir("charter-controlplane-killed")
	lock, err := Lock(stale)
	if err != nil {
		t.Fatal(err)
	}
	lock.Close()
	running := mkdir("charter-controlplane-running")
	held, err := Lock(running)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	kept := mkdir("charter-controlplane-kept")
	keptLock, err := Lock(kept)
	if err != nil {
		t.Fatal(err)
	}
	if err := Unlock(keptLock, true); err != nil {
		t.Fatal(err)
	}
	other := mkdir("someone-else")
	otherLock, err := Lock(other)
	if err != nil {
		t.Fatal(err)
	}
	otherLock.Close()

	removed, err := RemoveStale(parent, "charter-controlplane-*")
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != stale {
		t.Errorf("removed %v, want only %s", removed, stale)
	}
	for _, dir := range []string{running, kept, other} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s removed: %v", filepath.Base(dir), err)
		}
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale folder still there (%v)", err)
	}
}
