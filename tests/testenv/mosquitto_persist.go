package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// PersistentBroker is a Mosquitto that saves its retained messages and
// sessions in a directory and can be stopped and started again on the
// same port, as a broker that is upgraded or crashes.
type PersistentBroker struct {
	URL  string
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// MosquittoPersistent starts a PersistentBroker on a reserved loopback
// port (see Port). It saves only when it stops cleanly (SIGTERM), so a
// SIGKILL rolls it back to the last clean stop. It is killed when t ends.
func MosquittoPersistent(t testing.TB) *PersistentBroker {
	t.Helper()
	return restartable(t, func(b *PersistentBroker) string {
		return fmt.Sprintf("persistence true\npersistence_location %s/\nautosave_interval 0\n", b.dir)
	})
}

// restartable starts a Mosquitto that Stop and Start stop and start again
// on its port, with the configuration lines that conf returns for it.
func restartable(t testing.TB, conf func(*PersistentBroker) string) *PersistentBroker {
	t.Helper()
	b := &PersistentBroker{port: Port(t), dir: t.TempDir()}
	b.URL = fmt.Sprintf("tcp://127.0.0.1:%d", b.port)
	lines := fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\nmax_queued_messages %d\n%s", b.port, QueuedMessages, conf(b))
	if os.Geteuid() == 0 {
		lines += "user root\n" // as root, Mosquitto becomes user mosquitto, who cannot write here
	}
	if err := os.WriteFile(filepath.Join(b.dir, "mosquitto.conf"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b.cmd != nil {
			b.cmd.Process.Kill()
			<-b.done
		}
	})
	b.Start(t)
	return b
}

// Start starts the broker again after Stop, on the same port with the
// saved state, and returns once it listens.
func (b *PersistentBroker) Start(t testing.TB) {
	t.Helper()
	if b.cmd != nil {
		t.Fatal("testenv: the broker runs already")
	}
	logf, err := os.OpenFile(filepath.Join(b.dir, "mosquitto.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(Program(t, "mosquitto"), "-c", filepath.Join(b.dir, "mosquitto.conf"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mosquitto: %v", err)
	}
	b.cmd, b.done = cmd, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(b.done)
	for deadline := time.Now().Add(10 * time.Second); !Listens(cmd.Process.Pid, fmt.Sprintf("127.0.0.1:%d", b.port)); time.Sleep(20 * time.Millisecond) {
		select {
		case <-b.done:
			b.cmd = nil
			t.Fatalf("mosquitto exited at start: %s", b.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mosquitto (pid %d) not listening on %d within 10 s: %s", cmd.Process.Pid, b.port, b.Log())
		}
	}
}

// Stop sends sig (SIGTERM: a clean stop that saves; SIGKILL: a crash)
// and waits until the broker has exited.
func (b *PersistentBroker) Stop(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if b.cmd == nil {
		t.Fatal("testenv: the broker does not run")
	}
	if err := b.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("mosquitto did not exit within 10 s of %v", sig)
	}
	b.cmd = nil
}

// Log returns what the broker has logged.
func (b *PersistentBroker) Log() string {
	out, _ := os.ReadFile(filepath.Join(b.dir, "mosquitto.log"))
	return strings.TrimSpace(string(out))
}
