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
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// Mosquitto starts a real Mosquitto on a reserved loopback port (see
// Port), with set_tcp_nodelay on, and returns its URL once that Mosquitto
// listens there. It is killed when t ends.
func Mosquitto(t testing.TB) string {
	t.Helper()
	url, _ := mosquitto(t, fmt.Sprintf("allow_anonymous true\nset_tcp_nodelay true\npersistence false\nmax_inflight_messages 100\nmax_queued_messages %d\n", QueuedMessages))
	return url
}

// mosquitto starts Mosquitto with conf after a listener on a reserved
// loopback port, and returns its URL and process once it listens there. It
// is killed when t ends.
func mosquitto(t testing.TB, conf string) (url string, cmd *exec.Cmd) {
	t.Helper()
	bin := Program(t, "mosquitto")
	ports := daemon(t, "mosquitto", 1, 10*time.Second, func(dir string, ports []int) *exec.Cmd {
		path := filepath.Join(dir, "mosquitto.conf")
		if err := os.WriteFile(path, fmt.Appendf(nil, "listener %d 127.0.0.1\n%s", ports[0], conf), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command(bin, "-c", path)
		return cmd
	}, nil)
	return fmt.Sprintf("tcp://127.0.0.1:%d", ports[0]), cmd
}

// daemonTries bounds how often daemon starts a program whose port another
// program took between the reservation and the bind.
const daemonTries = 3

// daemon starts the program that command builds (in a new temporary dir,
// on n ports reserved with Port, listening on 127.0.0.1), with its output
// in dir/name.log, and kills it when t ends. It waits up to d until that
// process, not another one, listens on every port and ready (if not nil)
// reports true, and returns the ports. If the program exits saying that an
// address is in use, it starts again on new ports; it fails t with the log
// if the program exits for another reason or is not ready within d.
func daemon(t testing.TB, name string, n int, d time.Duration, command func(dir string, ports []int) *exec.Cmd, ready func(ports []int) bool) []int {
	t.Helper()
	for try := 1; ; try++ {
		ports := make([]int, n)
		for i := range ports {
			ports[i] = Port(t)
		}
		log, ok := startDaemon(t, name, ports, d, command, ready)
		if ok {
			return ports
		}
		if !strings.Contains(strings.ToLower(log), "address already in use") || try == daemonTries {
			t.Fatalf("%s exited at start: %s", name, log)
		}
		t.Logf("testenv: %s could not listen on %v (taken by a program that does not use testenv.Port); starting it again on new ports: %s", name, ports, log)
	}
}

// startDaemon is one try of daemon: ok is false, with the program's log,
// if the program exited before it was ready.
func startDaemon(t testing.TB, name string, ports []int, d time.Duration, command func(dir string, ports []int) *exec.Cmd, ready func(ports []int) bool) (log string, ok bool) {
	t.Helper()
	dir := t.TempDir()
	cmd := command(dir, ports)
	logPath := filepath.Join(dir, name+".log")
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
	readLog := func() string { b, _ := os.ReadFile(logPath); return strings.TrimSpace(string(b)) }
	up := func() bool {
		for _, p := range ports {
			if !Listens(cmd.Process.Pid, fmt.Sprintf("127.0.0.1:%d", p)) {
				return false
			}
		}
		return ready == nil || ready(ports)
	}
	deadline := time.Now().Add(d)
	for !up() {
		select {
		case <-exited:
			return readLog(), false
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) not listening on %v and ready within %v: %s", name, cmd.Process.Pid, ports, d, readLog())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "", true
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

// Etcd starts a real single-member etcd on reserved loopback ports (see
// Port), with its data in a temporary directory, and returns its client URL
// once that etcd listens there and reports itself healthy. It is killed when
// t ends.
func Etcd(t testing.TB) string {
	t.Helper()
	bin := Program(t, "etcd")
	url := func(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }
	ports := daemon(t, "etcd", 2, 20*time.Second, func(dir string, ports []int) *exec.Cmd {
		client, peer := url(ports[0]), url(ports[1])
		return exec.Command(bin, "--name", "test", "--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", "test="+peer, "--initial-cluster-state", "new")
	}, func(ports []int) bool {
		resp, err := http.Get(url(ports[0]) + "/health")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(body), `"true"`)
	})
	return url(ports[0])
}
