package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A control plane must never outlive the process that started it, whatever
// kills that process: a SIGKILL, a SIGPIPE from a closed `| tee`, the OOM
// killer. envtest starts etcd and kube-apiserver in process groups of their
// own (so a Ctrl-C does not reach them) and gives no way to set their
// parent-death signal, so each is started through a wrapper script that
// re-executes this very binary with the environment below: init then asks
// the kernel to SIGKILL the process when its parent dies, and replaces it
// with the real binary. The signal survives execve, and the pid, process
// group and parent stay those envtest knows.
const (
	// execEnv names the binary a re-executed process replaces itself with.
	execEnv = "CHARTER_CONTROLPLANE_EXEC"
	// parentEnv is the pid of the process that started the control
	// plane; a re-executed process whose parent is already another one
	// exits instead of running unwatched.
	parentEnv = "CHARTER_CONTROLPLANE_PARENT"
)

func init() {
	if os.Getenv(execEnv) == "" {
		return
	}
	// prctl applies to the calling thread and execve keeps it: both must
	// happen on the same one.
	runtime.LockOSThread()
	if err := execWithParentDeathSignal(); err != nil {
		fmt.Fprintf(os.Stderr, "charter control plane: %v\n", err)
		os.Exit(127)
	}
}

func execWithParentDeathSignal() error {
	binary := os.Getenv(execEnv)
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("setting the parent-death signal of %s: %w", binary, err)
	}
	// The parent may have died between fork and prctl: then nothing
	// would ever signal this process.
	if want := os.Getenv(parentEnv); strconv.Itoa(os.Getppid()) != want {
		return fmt.Errorf("not starting %s: the process that asked for it (pid %s) is gone", binary, want)
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, execEnv+"=") && !strings.HasPrefix(kv, parentEnv+"=") {
			env = append(env, kv)
		}
	}
	args := append([]string{binary}, os.Args[1:]...)
	return fmt.Errorf("executing %s: %w", binary, syscall.Exec(binary, args, env))
}

// watchedBinary writes, in dir, a script named after binary that starts it
// through this executable with the parent-death signal set, and returns the
// script's path: envtest runs that instead of the binary.
func watchedBinary(dir, binary string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding this executable to watch %s with: %w", filepath.Base(binary), err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	script := fmt.Sprintf("#!/bin/sh\n%s=%s %s=%d exec %s \"$@\"\n",
		execEnv, shellQuote(binary), parentEnv, os.Getpid(), shellQuote(self))
	path := filepath.Join(dir, filepath.Base(binary))
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		return "", fmt.Errorf("writing the start script of %s: %w", filepath.Base(binary), err)
	}
	return path, nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
