//go:build unix

package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gitsyncCacheHelperEnv, when set, makes TestGitsyncCacheHelperProcess
// take a gitsync cache as charter serve does, print its path and wait to
// be killed.
const gitsyncCacheHelperEnv = "CHARTER_TEST_GITSYNC_CACHE_HELPER"

func TestGitsyncCacheHelperProcess(t *testing.T) {
	if os.Getenv(gitsyncCacheHelperEnv) == "" {
		return // not a helper: nothing to test here
	}
	o := serveOptions{controllers: []string{controllerGitSync}}
	if _, err := processGitsyncCache(&o); err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString(o.gitsyncCacheDir + "\n")
	time.Sleep(time.Hour)
	os.Exit(0)
}

// startGitsyncCacheHelper starts a process that holds a gitsync cache in
// tmp, and returns it and its cache folder.
func startGitsyncCacheHelper(t *testing.T, tmp string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestGitsyncCacheHelperProcess$")
	cmd.Env = append(os.Environ(), gitsyncCacheHelperEnv+"=1", "TMPDIR="+tmp)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	dir := strings.TrimSpace(line)
	if err != nil || !filepath.IsAbs(dir) {
		t.Fatalf("helper process: %q (%v)", line, err)
	}
	return cmd, dir
}

// TestGitsyncCacheOfAKilledServeIsRemovedAtNextStart: charter serve killed
// with SIGKILL cannot remove its checkout folder; the next charter to take
// a gitsync cache removes it, and leaves the folder of one still running
// and a folder not made by charter.
func TestGitsyncCacheOfAKilledServeIsRemovedAtNextStart(t *testing.T) {
	tmp := t.TempDir()
	killed, killedDir := startGitsyncCacheHelper(t, tmp)
	_, runningDir := startGitsyncCacheHelper(t, tmp)
	// A checkout in the folder, as a sync leaves it.
	if err := os.MkdirAll(filepath.Join(killedDir, "team", "policies", "abc"), 0o700); err != nil {
		t.Fatal(err)
	}
	unlocked := filepath.Join(tmp, "charter-gitsync-by-hand")
	if err := os.Mkdir(unlocked, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := killed.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()
	if _, err := os.Stat(killedDir); err != nil {
		t.Fatalf("the killed process's folder is gone already (%v): nothing left to test", err)
	}

	t.Setenv("TMPDIR", tmp)
	next := serveOptions{controllers: []string{controllerGitSync}}
	remove, err := processGitsyncCache(&next)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(killedDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed charter's gitsync folder %s is still there (%v)", killedDir, err)
	}
	for _, dir := range []string{runningDir, unlocked, next.gitsyncCacheDir} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s removed: %v", dir, err)
		}
	}
	remove()
	left, _ := filepath.Glob(filepath.Join(tmp, "*"))
	if want := []string{runningDir, unlocked}; !slices.Equal(left, want) {
		t.Errorf("folders left: %v, want %v", left, want)
	}
}
