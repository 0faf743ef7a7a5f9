package localpg

import (
	"os/exec"
	"syscall"
)

// setAttrs runs cmd as cred (when not nil), in a process group of its own
// (a terminal's Ctrl-C reaches only charter, which stops postgres in
// order), and kills it when the thread that started it dies, so a killed
// test or `charter dev` leaves no server behind.
func setAttrs(cmd *exec.Cmd, cred *syscall.Credential) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
