package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Process is a program a test runs (see Start): its output goes to a
// file, and it is killed when the test ends, or when the test process
// dies (StartChild).
type Process struct {
	Cmd *exec.Cmd
	// Log is the file of its output (stdout and stderr).
	Log  string
	done chan struct{}
}

// Start starts cmd as a Process, its output in a new file named after
// name in a temporary directory. It is killed when t ends; if t failed,
// its output is logged then.
func Start(t testing.TB, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := StartChild(cmd); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	p := &Process{Cmd: cmd, Log: logf.Name(), done: make(chan struct{})}
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("output of %s (pid %d):\n%s", name, cmd.Process.Pid, p.Output())
		}
	})
	return p
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Done is closed once the process has exited (and been reaped).
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited returns the process's exit status once it has exited, waiting
// up to d: ok is false if it still runs then. A process killed by a
// signal has status -1.
func (p *Process) Exited(d time.Duration) (status int, ok bool) {
	select {
	case <-p.done:
		return p.Cmd.ProcessState.ExitCode(), true
	default:
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.Cmd.ProcessState.ExitCode(), true
	case <-timer.C:
		return 0, false
	}
}

// Stop sends sig and waits up to d for the process to exit; then it is
// killed. It returns the exit status (-1 for a process a signal ended).
func (p *Process) Stop(sig syscall.Signal, d time.Duration) int {
	p.Cmd.Process.Signal(sig)
	if status, ok := p.Exited(d); ok {
		return status
	}
	p.Kill()
	return p.Cmd.ProcessState.ExitCode()
}

// Kill kills the process (SIGKILL) and waits until it has exited.
func (p *Process) Kill() {
	p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Output returns what the process has written so far.
func (p *Process) Output() string {
	b, _ := os.ReadFile(p.Log)
	return strings.TrimRight(string(b), "\n")
}
