package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/charter-dev/charter/internal/controlplane"
)

// devHelperEnv, when set, makes TestDevHelperProcess run `charter dev` with
// these arguments (separated by \x1f) in this test binary: the process the
// test below kills.
const devHelperEnv = "CHARTER_TEST_DEV_HELPER_ARGS"

func TestDevHelperProcess(t *testing.T) {
	args := os.Getenv(devHelperEnv)
	if args == "" {
		return // not a helper: nothing to test here
	}
	cmd := newRootCommand()
	cmd.SetArgs(strings.Split(args, "\x1f"))
	cmd.SetOut(os.Stdout)
	cmd.SetErr(os.Stdout)
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// TestDevKilledLeavesNoControlPlane kills `charter dev` with SIGKILL, which
// it cannot catch: its etcd and kube-apiserver must die with it, and the
// next control plane started removes the work folder it left.
func TestDevKilledLeavesNoControlPlane(t *testing.T) {
	tmp := t.TempDir()
	repo := newPolicyRepo(t, map[string]string{"policies/require-team.yaml": requireTeamPolicy("Audit")})
	dev := exec.Command(os.Args[0], "-test.run=^TestDevHelperProcess$")
	dev.Env = append(os.Environ(),
		devHelperEnv+"="+strings.Join([]string{"dev", "--crds", crdDir(t), "--repo", repo.dir, "--path", "policies"}, "\x1f"),
		"TMPDIR="+tmp)
	stdout, err := dev.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	dev.Stderr = dev.Stdout
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = dev.Process.Kill()
			_ = dev.Wait()
		}
	})
	out := newReadyWriter("Ctrl-C stops charter dev.")
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			_, _ = out.Write(append(s.Bytes(), '\n'))
		}
	}()
	select {
	case <-out.ready:
	case <-time.After(5 * time.Minute):
		t.Fatalf("charter dev not ready within 5 minutes (as startDev waits):\n%s", out)
	}

	children := childProcesses(t, dev.Process.Pid)
	for _, name := range []string{controlplane.EtcdBinary, controlplane.APIServerBinary} {
		if _, ok := children[name]; !ok {
			t.Fatalf("charter dev (pid %d) runs no %s: its children are %v\n%s", dev.Process.Pid, name, children, out)
		}
	}
	workDirs, _ := filepath.Glob(filepath.Join(tmp, "charter-controlplane-*"))
	if len(workDirs) != 1 {
		t.Fatalf("work folders of charter dev in %s: %v, want one", tmp, workDirs)
	}

	if err := dev.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	_ = dev.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for name, pid := range children {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("%s (pid %d) still runs 15 s after charter dev was killed", name, pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// The folder is stale now: the next start (here, the same call it
	// makes) removes it, and only it.
	removed, err := controlplane.RemoveStaleWorkDirs(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != workDirs[0] {
		t.Errorf("stale folders removed: %v, want %v", removed, workDirs)
	}
	if _, err := os.Stat(workDirs[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("work folder %s of the killed charter dev still there (%v)", workDirs[0], err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) != 0 {
		t.Errorf("temporary folders left by the killed charter dev: %v", left)
	}
}

// childProcesses returns the children of pid by executable name.
func childProcesses(t *testing.T, pid int) map[string]int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	children := map[string]int{}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil {
			continue
		}
		children[filepath.Base(exe)] = child
	}
	return children
}

// alive tells whether pid runs: a zombie, dead but not yet reaped by its
// new parent, does not.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
