// Package testenv starts the real parts fencegate's tests run against:
// brokers (embedded and Mosquitto) on free loopback ports, small
// filesystems, and programs that may be missing on a laptop.
//
// A test that needs an external program skips when it is missing, except
// under CI (CI=true), where a missing program is a failure.
package testenv

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/mqttbroker"
)

// InCI reports whether the tests run under CI, where nothing may skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Need skips t (or, under CI, fails it) with the reason why.
func Need(t testing.TB, ok bool, format string, a ...any) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf(format, a...)
	if InCI() {
		t.Fatalf("CI=true and %s", msg)
	}
	t.Skip(msg)
}

// Program returns the path of an external program, skipping t (failing it
// under CI) if it is not installed.
func Program(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	Need(t, err == nil, "%s is not installed (.ci/run installs it)", name)
	return p
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// EmbeddedBroker starts the simulator's embedded broker on a free loopback
// port and returns its URL. It stops when t ends.
func EmbeddedBroker(t testing.TB) string {
	t.Helper()
	b, err := mqttbroker.Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatalf("embedded broker: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b.URL()
}

// Mosquitto starts a real Mosquitto on a free loopback port, with
// set_tcp_nodelay on, and returns its URL. It is killed when t ends.
func Mosquitto(t testing.TB) string {
	t.Helper()
	bin := Program(t, "mosquitto")
	dir := t.TempDir()
	port := FreePort(t)
	conf := filepath.Join(dir, "mosquitto.conf")
	text := fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\npersistence false\nmax_inflight_messages 100\n", port)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	daemon(t, exec.Command(bin, "-c", conf), filepath.Join(dir, "mosquitto.log"), 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "tcp://" + addr
}

// daemon starts cmd with its output in logPath, kills it when t ends, and
// waits until ready reports true; it fails t with the log if the program
// exits first or is not ready within d.
func daemon(t testing.TB, cmd *exec.Cmd, logPath string, d time.Duration, ready func() bool) {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		logf.Close()
	})
	deadline := time.Now().Add(d)
	for !ready() {
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s exited at start: %s", filepath.Base(cmd.Path), strings.TrimSpace(string(b)))
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s not ready within %v: %s", filepath.Base(cmd.Path), d, strings.TrimSpace(string(b)))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Brokers returns the brokers a protocol test should run against: the
// embedded one always, Mosquitto when installed (always under CI). Each
// entry starts its broker when called.
func Brokers() map[string]func(testing.TB) string {
	return map[string]func(testing.TB) string{
		"embedded":  EmbeddedBroker,
		"mosquitto": Mosquitto,
	}
}

// SmallFS mounts a tmpfs of the given size (e.g. "256k") on a new temporary
// directory and returns it; it is unmounted when t ends. It needs root: it
// skips without it, and fails under CI.
func SmallFS(t testing.TB, size string) string {
	t.Helper()
	Need(t, os.Geteuid() == 0, "mounting a small tmpfs needs root")
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		Need(t, false, "mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

// Fill writes into dir until its filesystem is full.
func Fill(t testing.TB, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			return
		}
	}
}

// Etcd starts a real single-member etcd on free loopback ports, with its
// data in a temporary directory, and returns its client URL. It is killed
// when t ends.
func Etcd(t testing.TB) string {
	t.Helper()
	bin := Program(t, "etcd")
	dir := t.TempDir()
	client := fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))
	cmd := exec.Command(bin, "--name", "test", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "test="+peer, "--initial-cluster-state", "new")
	daemon(t, cmd, filepath.Join(dir, "etcd.log"), 20*time.Second, func() bool {
		resp, err := http.Get(client + "/health")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(body), `"true"`)
	})
	return client
}
