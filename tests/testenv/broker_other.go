//go:build !linux

package testenv

import "os/exec"

// startChild starts cmd. Here only its stdin closing tells it that this
// process died.
func startChild(cmd *exec.Cmd) error { return cmd.Start() }
