package modbusio

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/simonvetter/modbus"

	"github.com/fencegate/fencegate/modbusio/modbusconf"
	"github.com/fencegate/fencegate/tests/testenv"
)

func rtuBus(t *testing.T, l *testenv.RTULine) *Bus {
	t.Helper()
	bus, err := NewBus(modbusconf.Bus{URL: "rtu://" + l.Gateway, Baud: 9600, Timeout: 300 * time.Millisecond, Settle: time.Second})
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
	l := testenv.NewRTULine(t)
	m := testenv.StartRTUModule(t, l.Module)
	bus := rtuBus(t, l)
	coil := output(t, bus, modbusconf.Output{Unit: 1, Table: modbusconf.Coils, Address: 3})
	reg := output(t, bus, modbusconf.Output{Unit: 1, Table: modbusconf.HoldingRegisters, Address: 2, OnValue: 0x0100, OffValue: 0x0200})
	works := func(t *testing.T, high bool) {
		t.Helper()
		if err := coil.Out(high); err != nil {
			t.Fatalf("Out(%v): %v", high, err)
		}
		m.Wrote(t, fmt.Sprintf("coil 3 %d", map[bool]int{false: 0, true: 1}[high]))
		if l, err := coil.Level(); err != nil || l != high {
			t.Fatalf("Level after Out(%v) = %v, %v", high, l, err)
		}
	}
	works(t, true)
	works(t, false)
	if err := reg.Out(true); err != nil {
		t.Fatal(err)
	}
	m.Wrote(t, "register 2 256")
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
		l.Set(testenv.RTUCorrupt)
		if err := coil.Out(false); !errors.Is(err, modbus.ErrBadCRC) {
			t.Fatalf("Out with a corrupted answer: %v; want bad crc", err)
		}
		works(t, false)
	})
	t.Run("slow module", func(t *testing.T) {
		l.Set(testenv.RTULate)
		if _, err := coil.Level(); !errors.Is(err, modbus.ErrRequestTimedOut) {
			t.Fatalf("Level of a module answering after 1 s: %v; want a timeout", err)
		}
		time.Sleep(1500 * time.Millisecond) // the late answer, discarded at the next open
		works(t, true)
	})
	t.Run("module stops mid-answer", func(t *testing.T) {
		l.Set(testenv.RTUCutOff)
		if err := coil.Out(false); err == nil {
			t.Fatal("Out succeeded with the answer cut off")
		} else {
			t.Logf("answer cut off: %v", err)
		}
		// The module is off: every request fails, and says so.
		if _, err := coil.Level(); !errors.Is(err, modbus.ErrRequestTimedOut) {
			t.Fatalf("Level with the module off: %v; want a timeout", err)
		}
		m.PowerCut()
		// Powered up again on the same line, with its coils cleared as a
		// module's are: the same output works, with no new bus.
		l.Set(testenv.RTUClean)
		m = testenv.StartRTUModule(t, l.Module)
		if h, err := coil.Level(); err != nil || h {
			t.Fatalf("Level of the restarted module = %v, %v; want false (its coils start off)", h, err)
		}
		works(t, true)
	})
}
