package sim

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel stop the gateway process if the simulator
// dies without stopping it (SIGKILL), so that no orphan keeps the store.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
