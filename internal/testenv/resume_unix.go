//go:build unix

package testenv

import (
	"os"
	"syscall"
)

// resume continues p if a test stopped it (SIGSTOP), so that it can be
// killed and reaped.
func resume(p *os.Process) { p.Signal(syscall.SIGCONT) }
