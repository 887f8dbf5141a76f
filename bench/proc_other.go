//go:build !linux

package bench

import (
	"errors"
	"os/exec"
)

// procUsage is not available without /proc: the report takes the CPU time
// and peak memory from the process's exit status instead.
func procUsage(int) (usage, error) { return usage{}, errors.New("bench: no /proc on this system") }

func dieWithParent(*exec.Cmd) {}

// fsType is not known here.
func fsType(string) string { return "" }
