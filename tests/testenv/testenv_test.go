package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for a child process: with
// TESTENV_HELPER=listen:PORT it listens on 127.0.0.1:PORT (exiting 1 with
// the error if it cannot) until killed; with TESTENV_HELPER=lock:PORT it
// exits 0 if it could reserve PORT's lock and 3 if another process holds it;
// with TESTENV_HELPER=broker:0 it starts an embedded broker, prints
// brokerd's pid and URL, and waits a minute to be killed.
func TestMain(m *testing.M) {
	if what, arg, ok := strings.Cut(os.Getenv("TESTENV_HELPER"), ":"); ok {
		os.Exit(helper(what, arg))
	}
	os.Exit(m.Run())
}

func helper(what, arg string) int {
	switch what {
	case "listen":
		ln, err := net.Listen("tcp4", "127.0.0.1:"+arg)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		defer ln.Close()
		fmt.Println("listening on", ln.Addr())
		time.Sleep(time.Minute)
		return 0
	case "lock":
		_, ok, err := lockPort(filepath.Join(PortDir, arg+".lock"))
		switch {
		case err != nil:
			fmt.Println(err)
			return 1
		case !ok:
			return 3
		}
		return 0
	case "broker":
		b, err := startBrokerd()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(b.cmd.Process.Pid, b.url)
		time.Sleep(time.Minute)
		return 0
	}
	return 2
}

func helperCmd(what string, port int) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("TESTENV_HELPER=%s:%d", what, port))
	return cmd
}

// Ports come from outside the kernel's ephemeral range, where no outgoing
// connection is given them.
func TestPortOutsideEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral range to check against: %v", err)
	}
	var lo, hi int
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		t.Fatalf("ip_local_port_range %q: %v", b, err)
	}
	for range 50 {
		if p := Port(t); p >= lo && p <= hi {
			t.Fatalf("Port() = %d, inside the ephemeral range %d-%d", p, lo, hi)
		}
	}
}

// A reserved port is locked against every other process until the test
// that reserved it ends, and free again after.
func TestPortHeldAcrossProcessesUntilTheTestEnds(t *testing.T) {
	var port int
	t.Run("hold", func(t *testing.T) {
		port = Port(t)
		err := helperCmd("lock", port).Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("another process locking port %d while this test holds it: %v, want exit 3 (held)", port, err)
		}
		if ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
			t.Errorf("reserved port %d is not bindable: %v", port, err)
		} else {
			ln.Close()
		}
	})
	if out, err := helperCmd("lock", port).CombinedOutput(); err != nil {
		t.Fatalf("another process locking port %d after the test that held it ended: %v %s, want success", port, err, out)
	}
}

func TestListens(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	if !Listens(os.Getpid(), addr) {
		t.Errorf("Listens(self, %s) = false, want true", addr)
	}
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	if Listens(other.Process.Pid, addr) {
		t.Errorf("Listens(sleep, %s) = true, want false: the listener is this process's", addr)
	}
	if c, err := net.Dial("tcp4", addr); err != nil {
		t.Fatal(err)
	} else {
		defer c.Close()
		_, port, _ := net.SplitHostPort(c.LocalAddr().String())
		if Listens(os.Getpid(), "127.0.0.1:"+port) {
			t.Errorf("Listens(self, %s) = true for a connected, not listening, socket", c.LocalAddr())
		}
	}
}

// A daemon is ready when the child listens, not when anything answers on
// its port: with another process on the first port given to it, the child
// fails to bind, and daemon starts it again on a new port.
func TestDaemonReadyIsTheChilds(t *testing.T) {
	impostor := -1
	var tries []int
	ports := daemon(t, "helper", 1, 10*time.Second, func(dir string, ports []int) *exec.Cmd {
		tries = append(tries, ports[0])
		if impostor < 0 {
			ln, err := net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", ports[0]))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			impostor = ports[0]
		}
		return helperCmd("listen", ports[0])
	}, nil)
	if len(tries) != 2 || ports[0] == impostor {
		t.Fatalf("daemon started the child on %v and returned port %d; want a second try on a port other than the taken %d", tries, ports[0], impostor)
	}
	if ports[0] != tries[1] {
		t.Errorf("daemon returned %d, not the port of its last try %d", ports[0], tries[1])
	}
}

func TestID(t *testing.T) {
	a, b := ID(t, "gw"), ID(t, "gw")
	if a != b {
		t.Errorf("ID(t, gw) = %q, then %q; want the same id for the same test and kind", a, b)
	}
	if c := ID(t, "k1"); c == a || !strings.HasPrefix(c, "k1-") {
		t.Errorf("ID(t, k1) = %q, want a k1- id other than %q", c, a)
	}
	var sub []string
	for range 2 {
		t.Run("sub/with spaces", func(t *testing.T) { sub = append(sub, ID(t, "gw")) })
	}
	if sub[0] == sub[1] || sub[0] == a {
		t.Errorf("ids of two runs of a subtest = %q, %q (parent %q); want all different", sub[0], sub[1], a)
	}
	long := strings.Repeat("x", 200)
	t.Run(long, func(t *testing.T) {
		id := ID(t, "controller-a")
		if len(id) > maxID || !validID(id) {
			t.Errorf("ID with a long test name = %q (%d characters), want at most %d of [A-Za-z0-9_-]", id, len(id), maxID)
		}
	})
	for _, id := range append(sub, a) {
		if !validID(id) {
			t.Errorf("ID = %q, want only [A-Za-z0-9_-]", id)
		}
	}
}
