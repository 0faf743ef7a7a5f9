//go:build !linux

package localpg

import (
	"os/exec"
	"syscall"
)

// setAttrs runs cmd as cred (when not nil).
func setAttrs(cmd *exec.Cmd, cred *syscall.Credential) {
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
}
