package testenv

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The Modbus RTU parts: a serial line made of two pseudo-terminals, and a
// relay module on it (pymodbus's serial server, Debian's python3-pymodbus),
// so that the serial framing, CRCs, timeouts and unit ids are real.

//go:embed testdata/rtu_slave.py
var rtuSlave []byte

// openPTY opens a pseudo-terminal: its master, and the path of its slave
// end, which a serial port library opens as it opens /dev/ttyUSB0.
func openPTY(t testing.TB) (*os.File, string) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		Need(t, false, "no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	m := os.NewFile(uintptr(fd), "ptmx")
	t.Cleanup(func() { m.Close() })
	return m, fmt.Sprintf("/dev/pts/%d", n)
}

// RTULine is the RS-485 line between the gateway's serial port (Gateway)
// and the relay module's (Module): two pseudo-terminals, their masters
// joined by this process, which passes every byte and, when told, spoils
// the module's next answer as a noisy or broken line does.
type RTULine struct {
	Gateway, Module string // the serial ports' paths
	mu              sync.Mutex
	fault           RTUFault
}

// RTUFault is what the line does to the module's answers.
type RTUFault int

const (
	RTUClean   RTUFault = iota
	RTUCorrupt          // one bit of the next answer flipped: a CRC error
	RTUCutOff           // the next answer cut after its first bytes, then mute
	RTUMute             // no answer passes: the module is off
	RTULate             // the next answer held back 1 s: a slow module
	// the next answer to a write of a holding register (function 6 or
	// 16) corrupted, so that a gateway's read-backs and coil writes
	// between do not take the fault
	RTUCorruptRegisterWrite
)

// NewRTULine makes a line; it lasts until t ends.
func NewRTULine(t testing.TB) *RTULine {
	gm, gpath := openPTY(t)
	mm, mpath := openPTY(t)
	l := &RTULine{Gateway: gpath, Module: mpath}
	go relayPTY(gm, func(b []byte) { mm.Write(b) }) // requests, untouched
	go relayPTY(mm, func(b []byte) {                // answers
		l.mu.Lock()
		f := l.fault
		if f == RTUCorruptRegisterWrite {
			if len(b) > 1 && (b[1] == 6 || b[1] == 16) {
				f = RTUCorrupt
			} else {
				f = RTUClean
			}
		}
		switch f {
		case RTUCutOff:
			l.fault = RTUMute
		case RTUCorrupt, RTULate:
			l.fault = RTUClean
		}
		l.mu.Unlock()
		switch f {
		case RTUMute:
			return
		case RTUCorrupt:
			b[len(b)-1] ^= 0x10
		case RTUCutOff:
			b = b[:min(len(b), 3)]
		case RTULate:
			time.Sleep(time.Second)
		}
		gm.Write(b)
	})
	return l
}

// relayPTY passes what comes out of the master m to pass, until m is
// closed. A master reads EIO while no program has its slave end open:
// between a serial port's close and its next open, or a module's restart.
func relayPTY(m *os.File, pass func([]byte)) {
	buf := make([]byte, 256)
	for {
		n, err := m.Read(buf)
		if errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		pass(buf[:n])
	}
}

// Set makes the line do f to the module's answers.
func (l *RTULine) Set(f RTUFault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fault = f
}

// RTUModule is a Modbus RTU relay module: unit 1, 16 coils and 16 holding
// registers, 9600 baud, no parity, on a serial port.
type RTUModule struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	mu     sync.Mutex
	writes []string // "coil 3 1", as the module saw them
}

// StartRTUModule powers a module on at the serial port port, its outputs
// off. It skips t (fails it under CI) without pymodbus.
func StartRTUModule(t testing.TB, port string) *RTUModule {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import pymodbus.server, serial_asyncio").Run(); err != nil {
		Need(t, false, "pymodbus cannot be imported (%v): install Debian's python3-pymodbus and python3-serial-asyncio (.ci/run does)", err)
	}
	script := filepath.Join(t.TempDir(), "rtu_slave.py")
	if err := os.WriteFile(script, rtuSlave, 0o644); err != nil {
		t.Fatal(err)
	}
	m := &RTUModule{}
	m.cmd = exec.Command(py, script, port, "1", "9600", "N")
	m.cmd.Stderr = os.Stderr
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if m.stdin, err = m.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.PowerCut)
	ready := make(chan struct{})
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if s.Text() == "ready" {
				close(ready)
				continue
			}
			m.mu.Lock()
			m.writes = append(m.writes, s.Text())
			m.mu.Unlock()
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the RTU module (pymodbus) did not start within 30 s")
	}
	return m
}

// PowerCut stops the module for good (its outputs with it); start another
// on the same port to power it on again.
func (m *RTUModule) PowerCut() {
	m.cmd.Process.Kill()
	m.cmd.Wait()
}

// Set sets an output on the module's side, as a button on the board or
// another master would: table "coil" or "register".
func (m *RTUModule) Set(t testing.TB, table string, address int, value uint16) {
	t.Helper()
	if _, err := fmt.Fprintf(m.stdin, "%s %d %d\n", table, address, value); err != nil {
		t.Fatalf("RTU module: %v", err)
	}
}

// Wrote waits for the module to report the write want ("coil 3 1"), and
// forgets what it saw of that output until then. Writes to other outputs
// stay: two outputs that come back after a power cut are each retried on
// their own backoff, so their order is not the test's to expect. It waits
// 30 s: a watched output that was down retries at most every 10 s (its
// backoff), and a busy machine adds to that.
func (m *RTUModule) Wrote(t testing.TB, want string) {
	t.Helper()
	output := func(w string) string { return w[:strings.LastIndexByte(w, ' ')+1] } // "coil 3 "
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		m.mu.Lock()
		for i, w := range m.writes {
			if w != want {
				continue
			}
			kept := m.writes[:0:0]
			for j, w := range m.writes {
				if j > i || output(w) != output(want) {
					kept = append(kept, w)
				}
			}
			m.writes = kept
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t.Fatalf("the RTU module never saw %q (it saw %q)", want, m.writes)
}
