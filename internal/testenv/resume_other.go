//go:build !unix

package testenv

import "os"

// resume does nothing where processes cannot be stopped with signals.
func resume(*os.Process) {}
