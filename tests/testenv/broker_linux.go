package testenv

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

var (
	forkOnce sync.Once
	forks    = make(chan func())
)

// startChild starts cmd so that the kernel kills it (SIGKILL) when this
// process dies. Pdeathsig fires when the thread that forked the child ends,
// not the process (go.dev/issue/27505), and Go ends a thread when a
// goroutine exits locked to it; so every child is forked from one thread,
// locked to a goroutine that never exits.
func startChild(cmd *exec.Cmd) error {
	forkOnce.Do(func() {
		go func() {
			runtime.LockOSThread()
			for f := range forks {
				f()
			}
		}()
	})
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	done := make(chan error)
	forks <- func() { done <- cmd.Start() }
	return <-done
}
