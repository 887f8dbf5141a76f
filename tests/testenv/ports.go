package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// PortDir is where Port keeps its lock files, one per reserved port
// (PORT.lock), shared by every test process on the machine that uses the
// same temporary directory.
var PortDir = filepath.Join(os.TempDir(), "fencegate-test-ports")

// minPorts is the fewest ports Port will choose from.
const minPorts = 1000

// Port reserves a loopback TCP port for a child process to listen on and
// returns it. Use it only when a program must be told its port before it
// starts (mosquitto, etcd, a gateway process's http address); an
// in-process server should listen on 127.0.0.1:0 and report its address.
//
// The port is outside the kernel's ephemeral range, so no outgoing
// connection is given it; it is locked (flock on PortDir/PORT.lock) until t
// ends, so no other test, package or concurrent suite is handed it; and it
// was bindable on 127.0.0.1 when reserved. A program that did not use Port
// can still take it in between: see Listens, to check that the listener is
// the child's.
func Port(t testing.TB) int {
	t.Helper()
	p, release, err := reservePort()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(release)
	return p
}

// FreePort is Port.
//
// Deprecated: use Port, or listen on 127.0.0.1:0 in process.
func FreePort(t testing.TB) int {
	t.Helper()
	return Port(t)
}

var (
	rangeOnce        sync.Once
	rangeLo, rangeHi int
	rangeErr         error
)

// portRange returns the ports Port chooses from: 20000 up to the start of
// the kernel's ephemeral range, or above its end if that leaves too few.
func portRange() (lo, hi int, err error) {
	rangeOnce.Do(func() {
		elo, ehi := 32768, 60999 // Linux's default, used where /proc has no answer
		if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
			f := strings.Fields(string(b))
			if len(f) == 2 {
				a, err1 := strconv.Atoi(f[0])
				b, err2 := strconv.Atoi(f[1])
				if err1 == nil && err2 == nil && a <= b {
					elo, ehi = a, b
				}
			}
		}
		switch {
		case elo-20000 >= minPorts:
			rangeLo, rangeHi = 20000, elo-1
		case 65535-ehi >= minPorts:
			rangeLo, rangeHi = ehi+1, 65535
		default:
			rangeErr = fmt.Errorf("the kernel's ephemeral port range %d-%d leaves fewer than %d ports between 20000 and 65535 for test servers; narrow it (sysctl -w net.ipv4.ip_local_port_range=\"32768 60999\")", elo, ehi, minPorts)
		}
	})
	return rangeLo, rangeHi, rangeErr
}

// reservePort picks a port from portRange, locks it and checks that it is
// bindable; release unlocks it.
func reservePort() (port int, release func(), err error) {
	lo, hi, err := portRange()
	if err != nil {
		return 0, nil, err
	}
	if err := os.MkdirAll(PortDir, 0o777); err != nil {
		return 0, nil, fmt.Errorf("port lock directory: %w", err)
	}
	os.Chmod(PortDir, 0o1777) // other users' suites lock ports here too
	n := hi - lo + 1
	start := rand.IntN(n)
	const tries = 500
	var lockErr error
	for i := range min(n, tries) {
		p := lo + (start+i)%n
		unlock, ok, err := lockPort(filepath.Join(PortDir, strconv.Itoa(p)+".lock"))
		if err != nil {
			lockErr = err
			continue
		}
		if !ok {
			continue // another test holds it
		}
		ln, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			unlock() // a program that does not use Port listens there
			continue
		}
		ln.Close()
		return p, unlock, nil
	}
	if lockErr != nil {
		return 0, nil, fmt.Errorf("no port reserved in %d tries in %d-%d: last lock error: %w (check the permissions of %s)", tries, lo, hi, lockErr, PortDir)
	}
	return 0, nil, fmt.Errorf("no port reserved in %d tries in %d-%d: all locked or in use", tries, lo, hi)
}

// Listens reports whether process pid has a TCP socket listening on addr's
// port (host:port). Where the system cannot tell (no /proc), it reports
// true: the caller's own probe is then all there is.
func Listens(pid int, addr string) bool {
	_, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return false
	}
	ok, err := listens(pid, port)
	if errors.Is(err, errNoProc) {
		return true
	}
	return err == nil && ok
}

var errNoProc = errors.New("testenv: no /proc to read sockets from")

// listens reads the listening sockets on port from /proc/PID/net/tcp{,6}
// and looks for one of them among /proc/PID/fd.
func listens(pid, port int) (bool, error) {
	if _, err := os.Stat("/proc/self/net/tcp"); err != nil {
		return false, errNoProc
	}
	inodes := map[string]bool{}
	for _, f := range []string{"tcp", "tcp6"} {
		if err := listeningInodes(fmt.Sprintf("/proc/%d/net/%s", pid, f), port, inodes); err != nil {
			return false, err
		}
	}
	if len(inodes) == 0 {
		return false, nil
	}
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false, err
	}
	for _, fd := range fds {
		l, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
		if err != nil {
			continue
		}
		if ino, ok := strings.CutPrefix(l, "socket:["); ok && inodes[strings.TrimSuffix(ino, "]")] {
			return true, nil
		}
	}
	return false, nil
}

// listeningInodes adds to inodes those of the sockets in path (a
// /proc/net/tcp table) that listen on port.
func listeningInodes(path string, port int, inodes map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) && strings.HasSuffix(path, "6") {
			return nil // no IPv6
		}
		return err
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" || !strings.HasSuffix(fields[1], want) {
			continue
		}
		inodes[fields[9]] = true
	}
	return sc.Err()
}
