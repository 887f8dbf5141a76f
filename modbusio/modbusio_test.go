package modbusio

import (
	"errors"
	"fmt"
	"io"
	"log"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simonvetter/modbus"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/modbusio/modbusconf"
	"github.com/fencegate/fencegate/tests/testenv"
)

// An Output is a pin that package actuator drives.
var _ actuator.Pin = (*Output)(nil)

// device is a Modbus TCP relay module in this process (the library's own
// server): unit 1 with 8 coils and 8 holding registers; another unit id
// is refused as a Modbus TCP gateway refuses a unit that does not answer.
type device struct {
	mu        sync.Mutex
	coils     [8]bool
	registers [8]uint16
	delay     time.Duration // before each answer: a slow device
	writes    int
}

func (d *device) HandleCoils(req *modbus.CoilsRequest) ([]bool, error) {
	return access(d, d.coils[:], req.UnitId, req.Addr, req.Quantity, req.IsWrite, req.Args)
}

func (d *device) HandleHoldingRegisters(req *modbus.HoldingRegistersRequest) ([]uint16, error) {
	return access(d, d.registers[:], req.UnitId, req.Addr, req.Quantity, req.IsWrite, req.Args)
}

// access reads or writes quantity values of d's table from addr, as
// unit asked.
func access[T any](d *device, table []T, unit uint8, addr, quantity uint16, write bool, args []T) ([]T, error) {
	if err := d.wait(unit); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if int(addr)+int(quantity) > len(table) {
		return nil, modbus.ErrIllegalDataAddress
	}
	if write {
		d.writes++
		copy(table[addr:], args)
		return nil, nil
	}
	return append([]T(nil), table[addr:addr+quantity]...), nil
}

func (d *device) HandleDiscreteInputs(*modbus.DiscreteInputsRequest) ([]bool, error) {
	return nil, modbus.ErrIllegalFunction
}

func (d *device) HandleInputRegisters(*modbus.InputRegistersRequest) ([]uint16, error) {
	return nil, modbus.ErrIllegalFunction
}

func (d *device) wait(unit uint8) error {
	d.mu.Lock()
	delay := d.delay
	d.mu.Unlock()
	time.Sleep(delay)
	if unit != 1 {
		return modbus.ErrGWTargetFailedToRespond
	}
	return nil
}

// reg and coil read the device's side.
func (d *device) reg(i int) uint16 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.registers[i]
}

func (d *device) coil(i int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.coils[i]
}

func (d *device) set(f func(d *device)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

// serve starts d on addr (tcp://127.0.0.1:PORT) and returns its stop.
func serve(t *testing.T, d *device, addr string) func() {
	t.Helper()
	s, err := modbus.NewServer(&modbus.ServerConfiguration{URL: addr, Timeout: time.Minute, MaxClients: 4,
		Logger: log.New(io.Discard, "", 0)}, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("modbus server on %s: %v", addr, err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { s.Stop() }) }
	t.Cleanup(stop)
	return stop
}

func newTCP(t *testing.T) (*device, string, *Bus) {
	t.Helper()
	d := &device{}
	addr := fmt.Sprintf("tcp://127.0.0.1:%d", testenv.Port(t))
	serve(t, d, addr)
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
		if got := d.coil(3); got != high {
			t.Fatalf("after Out(%v) the device's coil 3 is %v", high, got)
		}
		if l, err := o.Level(); err != nil || l != high {
			t.Fatalf("Level after Out(%v) = %v, %v", high, l, err)
		}
	}
	// A coil changed behind the gateway's back (a button on the board) is
	// what Level reads.
	d.set(func(d *device) { d.coils[3] = false })
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
	if d.reg(2) != 0x0100 {
		t.Fatalf("on wrote %#x; want 0x0100", d.reg(2))
	}
	if err := o.Out(false); err != nil {
		t.Fatal(err)
	}
	if l, err := o.Level(); err != nil || l || d.reg(2) != 0x0200 {
		t.Fatalf("off: register %#x, Level %v, %v; want 0x0200, false", d.reg(2), l, err)
	}
	// Neither value: said, and the bus stays usable.
	d.set(func(d *device) { d.registers[2] = 7 })
	if _, err := o.Level(); err == nil || !strings.Contains(err.Error(), "holds 7, neither on (256) nor off (512)") {
		t.Fatalf("Level of a register holding 7: %v", err)
	}
	// The default values: 1 on, 0 off.
	def := output(t, bus, modbusconf.Output{Unit: 1, Table: modbusconf.HoldingRegisters, Address: 5})
	if err := def.Out(true); err != nil || d.reg(5) != 1 {
		t.Fatalf("default on: %v, register %d", err, d.reg(5))
	}
}

// A device's refusal (an address it does not have, a unit a Modbus TCP
// gateway cannot reach) is an error that says so, and nothing is written.
func TestRefusedRequests(t *testing.T) {
	d, _, bus := newTCP(t)
	var n int
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
	if d.set(func(d *device) { n = d.writes }); n != 0 {
		t.Fatalf("%d writes reached the device", n)
	}
}

// A device that stops answering makes Out fail with the reason; once it is
// back, the next request reaches it without a restart.
func TestDeviceDownAndBack(t *testing.T) {
	d := &device{}
	addr := fmt.Sprintf("tcp://127.0.0.1:%d", testenv.Port(t))
	stop := serve(t, d, addr)
	bus, err := NewBus(modbusconf.Bus{URL: addr, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	o := output(t, bus, modbusconf.Output{Unit: 1, Table: modbusconf.Coils, Address: 0})
	if err := o.Out(true); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := o.Out(false); err == nil {
		t.Fatal("Out succeeded with the device gone")
	} else {
		t.Logf("device gone: %v", err)
	}
	if _, err := o.Level(); err == nil || !strings.Contains(err.Error(), "cannot connect") {
		t.Fatalf("Level with the device gone: %v; want cannot connect", err)
	}
	serve(t, d, addr)
	if err := o.Out(false); err != nil {
		t.Fatalf("Out once the device is back: %v", err)
	}
	if d.coil(0) {
		t.Fatal("the coil is still on after Out(false) reached the device")
	}
}

// A device slower than the timeout: the request fails as timed out, and
// the next one, answered in time, works.
func TestSlowDevice(t *testing.T) {
	d, _, bus := newTCP(t)
	o := output(t, bus, modbusconf.Output{Unit: 1, Table: modbusconf.Coils, Address: 1})
	d.set(func(d *device) { d.delay = time.Second })
	err := o.Out(true)
	if err == nil || !errors.Is(err, modbus.ErrRequestTimedOut) {
		t.Fatalf("Out to a slow device: %v; want a timeout", err)
	}
	d.set(func(d *device) { d.delay = 0 })
	time.Sleep(time.Second) // the late answer is not taken for the next one's
	if err := o.Out(true); err != nil {
		t.Fatal(err)
	}
	if l, err := o.Level(); err != nil || !l {
		t.Fatalf("Level = %v, %v; want true", l, err)
	}
}
