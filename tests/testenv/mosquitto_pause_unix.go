//go:build unix

package testenv

import (
	"syscall"
	"testing"
)

// Pause stops the broker (SIGSTOP), as a broker that hangs: connections
// stay open and nothing is read or answered. Stop(SIGKILL) ends it then,
// as a hung broker's supervisor would.
func (b *PersistentBroker) Pause(t testing.TB) {
	t.Helper()
	if b.cmd == nil {
		t.Fatal("testenv: the broker does not run")
	}
	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}
