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

// PersistentBroker is a Mosquitto that can be stopped and started again on
// the same port, as a broker that is upgraded or crashes; one started with
// persistence (MosquittoPersistent, BrokerOptions.Persistent) saves its
// retained messages and sessions in a directory across the restart.
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
	return MosquittoWith(t, BrokerOptions{Persistent: true})
}

// BrokerOptions configure MosquittoWith.
type BrokerOptions struct {
	// Users, if not nil, are the only clients allowed (name → password,
	// through a password file made with mosquitto_passwd); nil allows
	// anonymous clients.
	Users map[string]string
	// ACL is the broker's ACL (Mosquitto's acl_file syntax); "" for none.
	ACL string
	// Persistent makes the broker save its retained messages and sessions,
	// only when it stops cleanly (SIGTERM): a SIGKILL rolls it back to the
	// last clean stop. Without it a restart keeps nothing.
	Persistent bool
	// Conf is more configuration, after the rest: global settings, then
	// perhaps a bridge's section (which must come last).
	Conf string
	// Port is the port to listen on, one reserved with Port (for a
	// configuration that must name it before the broker starts); 0
	// reserves one.
	Port int
}

// MosquittoWith starts a PersistentBroker, a real Mosquitto that Stop and
// Start stop and start again on its reserved loopback port (see Port),
// configured as o says. It is killed when t ends.
func MosquittoWith(t testing.TB, o BrokerOptions) *PersistentBroker {
	t.Helper()
	b := &PersistentBroker{port: o.Port, dir: t.TempDir()}
	if b.port == 0 {
		b.port = Port(t)
	}
	b.URL = fmt.Sprintf("tcp://127.0.0.1:%d", b.port)
	lines := fmt.Sprintf("listener %d 127.0.0.1\nset_tcp_nodelay true\nmax_queued_messages %d\n", b.port, QueuedMessages)
	if o.Users == nil {
		lines += "allow_anonymous true\n"
	} else {
		pw := filepath.Join(b.dir, "passwd")
		writePasswd(t, pw, o.Users)
		lines += fmt.Sprintf("allow_anonymous false\npassword_file %s\n", pw)
	}
	if o.ACL != "" {
		acl := filepath.Join(b.dir, "acl")
		if err := os.WriteFile(acl, []byte(strings.TrimSpace(o.ACL)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		lines += fmt.Sprintf("acl_file %s\n", acl)
	}
	if o.Persistent {
		lines += fmt.Sprintf("persistence true\npersistence_location %s/\nautosave_interval 0\n", b.dir)
	} else {
		lines += "persistence false\n"
	}
	if os.Geteuid() == 0 {
		lines += "user root\n" // as root, Mosquitto becomes user mosquitto, who cannot write here
	}
	lines += o.Conf
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
