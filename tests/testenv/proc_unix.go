//go:build unix

package testenv

import (
	"os"
	"os/exec"
	"syscall"
)

// Pause stops p (SIGSTOP), as a GC pause or a suspended laptop would: it
// holds its connections and its leases but does nothing until Resume.
func Pause(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

// Resume continues p after Pause; on a process that is not stopped it does
// nothing, so cleanups may call it before they kill.
func Resume(p *os.Process) { p.Signal(syscall.SIGCONT) }

// AsNobody makes cmd run as the user and group nobody (65534) when the test
// runs as root, so that it meets file permissions as an installed service
// would; it reports whether it did.
func AsNobody(cmd *exec.Cmd) bool {
	if os.Geteuid() != 0 {
		return false
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return true
}
