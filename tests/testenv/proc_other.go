//go:build !unix

package testenv

import (
	"errors"
	"os"
	"os/exec"
)

// Pause fails where processes cannot be stopped with signals; tests that
// pause a process skip there.
func Pause(*os.Process) error {
	return errors.New("processes cannot be paused with signals on this system")
}

// Resume does nothing where processes cannot be stopped with signals.
func Resume(*os.Process) {}

// AsNobody does nothing where there is no root to drop from.
func AsNobody(*exec.Cmd) bool { return false }
