package main

import (
	"errors"
	"os"
	"testing"
)

// Each charter process gets a gitsync cache of its own, removed on exit;
// a folder given by flag is the caller's and stays.
func TestProcessGitsyncCache(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	a := serveOptions{controllers: []string{controllerGitSync}}
	b := a
	removeA, err := processGitsyncCache(&a)
	if err != nil {
		t.Fatal(err)
	}
	removeB, err := processGitsyncCache(&b)
	if err != nil {
		t.Fatal(err)
	}
	if a.gitsyncCacheDir == "" || a.gitsyncCacheDir == b.gitsyncCacheDir {
		t.Fatalf("two processes share the cache folder %q", a.gitsyncCacheDir)
	}
	fi, err := os.Stat(a.gitsyncCacheDir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("cache folder %s: %v, mode %v; want 0700", a.gitsyncCacheDir, err, fi.Mode())
	}
	removeA()
	if _, err := os.Stat(a.gitsyncCacheDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cache folder %s still there after exit (%v)", a.gitsyncCacheDir, err)
	}
	if _, err := os.Stat(b.gitsyncCacheDir); err != nil {
		t.Errorf("removing one process's cache removed the other's: %v", err)
	}
	removeB()

	given := serveOptions{controllers: []string{controllerGitSync}, gitsyncCacheDir: t.TempDir()}
	remove, err := processGitsyncCache(&given)
	if err != nil {
		t.Fatal(err)
	}
	remove()
	if _, err := os.Stat(given.gitsyncCacheDir); err != nil {
		t.Errorf("the --gitsync-cache-dir folder was removed: %v", err)
	}
	none := serveOptions{controllers: []string{controllerAdmission}}
	if _, err := processGitsyncCache(&none); err != nil || none.gitsyncCacheDir != "" {
		t.Errorf("without gitsync: cache folder %q (%v), want none", none.gitsyncCacheDir, err)
	}
}
