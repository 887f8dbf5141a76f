package modbusio

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/simonvetter/modbus"
	"golang.org/x/sys/unix"

	"github.com/fencegate/fencegate/modbusio/modbusconf"
	"github.com/fencegate/fencegate/tests/testenv"
)

// openPTY opens a pseudo-terminal: its master, and the path of its slave
// end, which a serial port library opens as it opens /dev/ttyUSB0.
func openPTY(t *testing.T) (*os.File, string) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
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

// line is the RS-485 line between the gateway's serial port and the
// relay module's: two pseudo-terminals, their masters joined by this
// process, which passes every byte and, when told, spoils the module's
// next answer as a noisy or broken line does.
type line struct {
	gateway, module string // the serial ports' paths
	mu              sync.Mutex
	fault           fault
}

type fault int

const (
	clean   fault = iota
	corrupt       // one bit of the next answer flipped: a CRC error
	cutOff        // the next answer cut after its first bytes, then mute
	mute          // no answer passes: the module is off
	late          // the next answer held back 1 s: a slow module
)

func newLine(t *testing.T) *line {
	gm, gpath := openPTY(t)
	mm, mpath := openPTY(t)
	l := &line{gateway: gpath, module: mpath}
	go relay(gm, func(b []byte) { mm.Write(b) }) // requests, untouched
	go relay(mm, func(b []byte) {                // answers
		l.mu.Lock()
		f := l.fault
		switch f {
		case cutOff:
			l.fault = mute
		case corrupt, late:
			l.fault = clean
		}
		l.mu.Unlock()
		switch f {
		case mute:
			return
		case corrupt:
			b[len(b)-1] ^= 0x10
		case cutOff:
			b = b[:min(len(b), 3)]
		case late:
			time.Sleep(time.Second)
		}
		gm.Write(b)
	})
	return l
}

// relay passes what comes out of the master m to pass, until m is
// closed. A master reads EIO while no program has its slave end open:
// between a serial port's close and its next open, or a module's restart.
func relay(m *os.File, pass func([]byte)) {
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

func (l *line) set(f fault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fault = f
}

// module is a Modbus RTU relay module: pymodbus's serial server (Debian's
// python3-pymodbus), unit 1, on the line's module end.
type module struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	writes []string // "coil 3 1", as the module saw them
	ready  chan struct{}
}

func startModule(t *testing.T, port string) *module {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import pymodbus.server, serial_asyncio").Run(); err != nil {
		testenv.Need(t, false, "pymodbus cannot be imported (%v): install Debian's python3-pymodbus and python3-serial-asyncio (.ci/run does)", err)
	}
	m := &module{ready: make(chan struct{})}
	m.cmd = exec.Command(py, "testdata/rtu_slave.py", port, "1", "9600", "N")
	m.cmd.Stderr = os.Stderr
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.cmd.Process.Kill(); m.cmd.Wait() })
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if s.Text() == "ready" {
				close(m.ready)
				continue
			}
			m.mu.Lock()
			m.writes = append(m.writes, s.Text())
			m.mu.Unlock()
		}
	}()
	select {
	case <-m.ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the RTU module (pymodbus) did not start within 30 s")
	}
	return m
}

// wrote waits for the module to report the write want ("coil 3 1").
func (m *module) wrote(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		m.mu.Lock()
		for _, w := range m.writes {
			if w == want {
				m.writes = nil
				m.mu.Unlock()
				return
			}
		}
		m.mu.Unlock()
	}
	t.Fatalf("the module never saw %q (it saw %q)", want, m.writes)
}

func rtuBus(t *testing.T, l *line) *Bus {
	t.Helper()
	bus, err := NewBus(modbusconf.Bus{URL: "rtu://" + l.gateway, Baud: 9600, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bus.Close() })
	return bus
}

// TestRTU drives a real Modbus RTU module over a serial line: coils and a
// register used as a coil, written and read back, and every fault of the
// line answered with an error that says what happened, after which the
// bus works again.
func TestRTU(t *testing.T) {
	l := newLine(t)
	m := startModule(t, l.module)
	bus := rtuBus(t, l)
	coil := output(t, bus, modbusconf.Output{Unit: 1, Table: modbusconf.Coils, Address: 3})
	reg := output(t, bus, modbusconf.Output{Unit: 1, Table: modbusconf.HoldingRegisters, Address: 2, OnValue: 0x0100, OffValue: 0x0200})
	works := func(t *testing.T, high bool) {
		t.Helper()
		if err := coil.Out(high); err != nil {
			t.Fatalf("Out(%v): %v", high, err)
		}
		m.wrote(t, fmt.Sprintf("coil 3 %d", map[bool]int{false: 0, true: 1}[high]))
		if l, err := coil.Level(); err != nil || l != high {
			t.Fatalf("Level after Out(%v) = %v, %v", high, l, err)
		}
	}
	works(t, true)
	works(t, false)
	if err := reg.Out(true); err != nil {
		t.Fatal(err)
	}
	m.wrote(t, "register 2 256")
	if h, err := reg.Level(); err != nil || !h {
		t.Fatalf("register Level = %v, %v; want true", h, err)
	}

	t.Run("wrong unit id", func(t *testing.T) {
		// No module answers unit 7 on this bus: the request times out.
		o := output(t, bus, modbusconf.Output{Unit: 7, Table: modbusconf.Coils, Address: 3})
		if err := o.Out(true); !errors.Is(err, modbus.ErrRequestTimedOut) || !strings.Contains(err.Error(), "unit 7 coil 3") {
			t.Fatalf("Out to unit 7: %v; want a timeout naming unit 7 coil 3", err)
		}
		works(t, true)
	})
	t.Run("CRC error", func(t *testing.T) {
		l.set(corrupt)
		if err := coil.Out(false); !errors.Is(err, modbus.ErrBadCRC) {
			t.Fatalf("Out with a corrupted answer: %v; want bad crc", err)
		}
		works(t, false)
	})
	t.Run("slow module", func(t *testing.T) {
		l.set(late)
		if _, err := coil.Level(); !errors.Is(err, modbus.ErrRequestTimedOut) {
			t.Fatalf("Level of a module answering after 1 s: %v; want a timeout", err)
		}
		time.Sleep(1500 * time.Millisecond) // the late answer, discarded at the next open
		works(t, true)
	})
	t.Run("module stops mid-answer", func(t *testing.T) {
		l.set(cutOff)
		if err := coil.Out(false); err == nil {
			t.Fatal("Out succeeded with the answer cut off")
		} else {
			t.Logf("answer cut off: %v", err)
		}
		// The module is off: every request fails, and says so.
		if _, err := coil.Level(); !errors.Is(err, modbus.ErrRequestTimedOut) {
			t.Fatalf("Level with the module off: %v; want a timeout", err)
		}
		m.cmd.Process.Kill()
		m.cmd.Wait()
		// Powered up again on the same line, with its coils cleared as a
		// module's are: the same output works, with no new bus.
		l.set(clean)
		m = startModule(t, l.module)
		if h, err := coil.Level(); err != nil || h {
			t.Fatalf("Level of the restarted module = %v, %v; want false (its coils start off)", h, err)
		}
		works(t, true)
	})
}
