package localpg_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/charter-dev/charter/internal/localpg"
	"github.com/charter-dev/charter/internal/localpg/localpgtest"
)

// deadPID is the PID of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestRemoveStaleDirs removes the folders whose postmaster.pid names a
// dead process, in both layouts, and leaves the others: a running
// server's, one without a postmaster.pid (initialising, or kept), and a
// folder TempDir did not make.
func TestRemoveStaleDirs(t *testing.T) {
	parent := t.TempDir()
	dead := deadPID(t)
	for _, tc := range []struct {
		folder, pidFile string
		pid             int
		removed         bool
	}{
		{"charter-postgres-killed", "data/postmaster.pid", dead, true},
		{"charter-postgres-killed-dev", "postgres/data/postmaster.pid", dead, true},
		{"charter-postgres-running", "data/postmaster.pid", os.Getpid(), false},
		{"charter-postgres-initialising", "", 0, false},
		{"someone-else", "data/postmaster.pid", dead, false},
	} {
		dir := filepath.Join(parent, tc.folder)
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		if tc.pidFile != "" {
			file := filepath.Join(dir, tc.pidFile)
			if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
				t.Fatal(err)
			}
			// postgres's own format: the PID, then the data folder, start time, port...
			content := strconv.Itoa(tc.pid) + "\n" + filepath.Dir(file) + "\n1764694800\n5432\n"
			if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		defer func() {
			_, err := os.Stat(dir)
			if gone := errors.Is(err, os.ErrNotExist); gone != tc.removed {
				t.Errorf("%s: removed %v, want %v (stat: %v)", tc.folder, gone, tc.removed, err)
			}
		}()
	}
	removed, err := localpg.RemoveStaleDirs(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 {
		t.Errorf("RemoveStaleDirs returned %v, want the two killed servers' folders", removed)
	}
}

// TestTempDirRemovesKilledServersFolder: a real server's folder stays
// while it runs; once its postmaster is killed (as when the process that
// ran it is), the next TempDir removes it.
func TestTempDirRemovesKilledServersFolder(t *testing.T) {
	// Not t.TempDir(): its own parent is private, and under root the
	// server runs as nobody, who must reach the folder.
	parent, err := os.MkdirTemp("", "localpg-stale-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", parent)
	srv := localpgtest.StartShared(t)
	dir := srv.Dir()
	t.Cleanup(func() { _ = srv.Stop(); _ = os.RemoveAll(dir) })

	if removed, err := localpg.RemoveStaleDirs(parent); err != nil || len(removed) != 0 {
		t.Fatalf("with the server running: removed %v (err %v), want nothing", removed, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(string(data[:slices.Index(data, '\n')]))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Stop returns once the killed postmaster has been reaped.
	_ = srv.Stop()

	fresh, err := localpg.TempDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed server's folder %s is still there after TempDir (stat: %v)", dir, err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("TempDir's own folder: %v", err)
	}
}
