package modbusio

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/simonvetter/modbus"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/modbusio/modbusconf"
	"github.com/fencegate/fencegate/modbusio/modbussim"
	"github.com/fencegate/fencegate/tests/testenv"
)

// An Output is a pin that package actuator drives.
var _ actuator.Pin = (*Output)(nil)

// newTCP is a relay module in this process (unit 1) and a bus to it.
func newTCP(t *testing.T) (*modbussim.Module, string, *Bus) {
	t.Helper()
	addr := fmt.Sprintf("tcp://127.0.0.1:%d", testenv.Port(t))
	d, err := modbussim.Start(addr, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	bus, err := NewBus(modbusconf.Bus{URL: addr, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bus.Close() })
	return d, addr, bus
}

func output(t *testing.T, bus *Bus, c modbusconf.Output) *Output {
	t.Helper()
	o, err := bus.Output(c)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestCoilWrittenAndReadBack(t *testing.T) {
	d, _, bus := newTCP(t)
	o := output(t, bus, modbusconf.Output{Unit: 1, Table: modbusconf.Coils, Address: 3})
	for _, high := range []bool{true, false, true} {
		if err := o.Out(high); err != nil {
			t.Fatal(err)
		}
		if got := d.Coil(3); got != high {
			t.Fatalf("after Out(%v) the device's coil 3 is %v", high, got)
		}
		if l, err := o.Level(); err != nil || l != high {
			t.Fatalf("Level after Out(%v) = %v, %v", high, l, err)
		}
	}
	// A coil changed behind the gateway's back (a button on the board) is
	// what Level reads.
	d.SetCoil(3, false)
	if l, err := o.Level(); err != nil || l {
		t.Fatalf("Level after the device's own change = %v, %v; want false", l, err)
	}
}

func TestRegisterAsCoil(t *testing.T) {
	d, _, bus := newTCP(t)
	// The common RS-485 relay boards: 0x0100 closes, 0x0200 opens.
	o := output(t, bus, modbusconf.Output{Unit: 1, Table: modbusconf.HoldingRegisters, Address: 2, OnValue: 0x0100, OffValue: 0x0200})
	if err := o.Out(true); err != nil {
		t.Fatal(err)
	}
	if d.Register(2) != 0x0100 {
		t.Fatalf("on wrote %#x; want 0x0100", d.Register(2))
	}
	if err := o.Out(false); err != nil {
		t.Fatal(err)
	}
	if l, err := o.Level(); err != nil || l || d.Register(2) != 0x0200 {
		t.Fatalf("off: register %#x, Level %v, %v; want 0x0200, false", d.Register(2), l, err)
	}
	// Neither value: said, and the bus stays usable.
	d.SetRegister(2, 7)
	if _, err := o.Level(); err == nil || !strings.Contains(err.Error(), "holds 7, neither on (256) nor off (512)") {
		t.Fatalf("Level of a register holding 7: %v", err)
	}
	// The default values: 1 on, 0 off.
	def := output(t, bus, modbusconf.Output{Unit: 1, Table: modbusconf.HoldingRegisters, Address: 5})
	if err := def.Out(true); err != nil || d.Register(5) != 1 {
		t.Fatalf("default on: %v, register %d", err, d.Register(5))
	}
}

// A device's refusal (an address it does not have, a unit a Modbus TCP
// gateway cannot reach) is an error that says so, and nothing is written.
func TestRefusedRequests(t *testing.T) {
	d, _, bus := newTCP(t)
	for _, c := range []struct {
		out  modbusconf.Output
		want string
	}{
		{modbusconf.Output{Unit: 1, Table: modbusconf.Coils, Address: 100}, "illegal data address"},
		{modbusconf.Output{Unit: 9, Table: modbusconf.Coils, Address: 1}, "gateway target device failed to respond"},
	} {
		o := output(t, bus, c.out)
		err := o.Out(true)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), o.String()) {
			t.Errorf("%s: Out = %v; want an error naming the output and %q", o, err, c.want)
		}
	}
	if n := d.Writes(); n != 0 {
		t.Fatalf("%d writes reached the device", n)
	}
}

// A device that stops answering (its power cut) makes Out fail with the
// reason; once it is back, the next request reaches it without a restart.
func TestDeviceDownAndBack(t *testing.T) {
	d, _, bus := newTCP(t)
	o := output(t, bus, modbusconf.Output{Unit: 1, Table: modbusconf.Coils, Address: 0})
	if err := o.Out(true); err != nil {
		t.Fatal(err)
	}
	d.PowerCut()
	if err := o.Out(false); err == nil {
		t.Fatal("Out succeeded with the device gone")
	} else {
		t.Logf("device gone: %v", err)
	}
	if _, err := o.Level(); err == nil || !strings.Contains(err.Error(), "cannot connect") {
		t.Fatalf("Level with the device gone: %v; want cannot connect", err)
	}
	if err := d.PowerOn(); err != nil {
		t.Fatal(err)
	}
	if l, err := o.Level(); err != nil || l {
		t.Fatalf("Level once the device is back = %v, %v; want false: a power cut clears its coils", l, err)
	}
	if err := o.Out(true); err != nil {
		t.Fatalf("Out once the device is back: %v", err)
	}
	if !d.Coil(0) {
		t.Fatal("the coil is off after Out(true) reached the device")
	}
}

// A device slower than the timeout: the request fails as timed out, and
// the next one, answered in time, works.
func TestSlowDevice(t *testing.T) {
	d, _, bus := newTCP(t)
	o := output(t, bus, modbusconf.Output{Unit: 1, Table: modbusconf.Coils, Address: 1})
	d.SetDelay(time.Second)
	err := o.Out(true)
	if err == nil || !errors.Is(err, modbus.ErrRequestTimedOut) {
		t.Fatalf("Out to a slow device: %v; want a timeout", err)
	}
	d.SetDelay(0)
	time.Sleep(time.Second) // the late answer is not taken for the next one's
	if err := o.Out(true); err != nil {
		t.Fatal(err)
	}
	if l, err := o.Level(); err != nil || !l {
		t.Fatalf("Level = %v, %v; want true", l, err)
	}
}
