package localpg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/charter-dev/charter/internal/workdir"
)

// dirPattern names the folders TempDir makes.
const dirPattern = "charter-postgres-*"

// RemoveStaleDirs removes the folders TempDir made in parent (the
// temporary folder when empty) whose PostgreSQL server was killed, and
// returns their paths. A folder is stale when a postmaster.pid is left in
// it (postgres removes it when it shuts down cleanly) and no process of
// that PID is alive: the server was killed, with the process that ran it
// (Start ties postgres to it on Linux). A folder without a postmaster.pid
// is left alone: its server is still being initialised, or it was stopped
// and its folder kept on purpose (a failed test's, with its log). So is one
// whose postmaster runs, and one this user did not make: another live
// run's folder is never touched.
func RemoveStaleDirs(parent string) ([]string, error) {
	return workdir.RemoveStaleMatching(parent, dirPattern, "PostgreSQL folder", staleDir)
}

// staleDir tells whether dir holds the data of a server that was killed.
// The data folder is dir/data (Start(TempDir())) or dir/<name>/data (a
// folder of the caller's, as charter dev's dir/postgres).
func staleDir(dir string) (bool, error) {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false, nil
	}
	if !ownFolder(fi) {
		return false, nil
	}
	var pidFiles []string
	for _, pattern := range []string{"data/postmaster.pid", "*/data/postmaster.pid"} {
		found, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return false, err
		}
		pidFiles = append(pidFiles, found...)
	}
	if len(pidFiles) == 0 {
		return false, nil
	}
	for _, file := range pidFiles {
		pid, err := postmasterPID(file)
		if err != nil {
			return false, fmt.Errorf("checking whether the PostgreSQL server of %s runs: %w", dir, err)
		}
		if alive(pid) {
			return false, nil
		}
	}
	return true, nil
}

// ownFolder tells whether this user made the folder: it owns it, or, as
// root, the user Start runs the server as does (Start hands it the
// folder).
func ownFolder(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	if int(st.Uid) == os.Getuid() {
		return true
	}
	cred, err := serverCredential()
	return err == nil && cred != nil && st.Uid == cred.Uid
}

// postmasterPID reads the PID on the first line of a postmaster.pid.
func postmasterPID(file string) (int, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(data), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: no PID on its first line", file)
	}
	return pid, nil
}

// alive tells whether a process of that PID exists. A PID reused by
// another process counts as alive: the folder is then kept, never removed
// under a running server.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
