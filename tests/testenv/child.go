package testenv

import "os/exec"

// StartChild starts cmd so that, where the system allows (Linux), the
// kernel kills it when the test process dies, however it dies: a gateway
// or controller a test started must not outlive a test binary that a
// timeout ended.
func StartChild(cmd *exec.Cmd) error { return startChild(cmd) }
