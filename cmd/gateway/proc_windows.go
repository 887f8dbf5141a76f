//go:build windows

package main

import (
	"errors"
	"io"
)

// pauseSelf is not available on Windows, which cannot stop a process from
// the outside and continue it.
func pauseSelf(io.Writer) error {
	return errors.New("--stop-after-grant needs Unix job control (SIGSTOP and SIGCONT)")
}
