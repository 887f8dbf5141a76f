package modbusconf

import (
	"strings"
	"testing"
	"time"
)

func TestErrors(t *testing.T) {
	for _, c := range []struct {
		bus  Bus
		want string
	}{
		{Bus{URL: ""}, "want tcp://HOST:PORT or rtu:///dev/SERIALPORT"},
		{Bus{URL: "udp://x:502"}, "want tcp://HOST:PORT or rtu:///dev/SERIALPORT"},
		{Bus{URL: "tcp://plc"}, "want tcp://HOST:PORT"},
		{Bus{URL: "tcp://plc:502", Baud: 9600}, "are for rtu:// buses"},
		{Bus{URL: "rtu://dev/ttyUSB0"}, "three slashes"},
		{Bus{URL: "rtu:///dev/ttyUSB0", Parity: "mark"}, `parity "mark"`},
		{Bus{URL: "rtu:///dev/ttyUSB0", StopBits: 3}, "stop_bits 3"},
		{Bus{URL: "tcp://plc:502", Timeout: -time.Second}, "want a positive duration"},
	} {
		if _, err := c.bus.Resolve(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want %q", c.bus, err, c.want)
		}
	}
	for _, c := range []struct {
		out  Output
		want string
	}{
		{Output{Unit: 0, Table: Coils}, "unit 0: an RTU device's unit id is 1 to 247"},
		{Output{Unit: 248, Table: Coils}, "unit 248"},
		{Output{Unit: 1, Table: "input"}, `table "input"`},
		{Output{Unit: 1, Table: Coils, OnValue: 1}, "for holding registers"},
		{Output{Unit: 1, Table: HoldingRegisters, OnValue: 3, OffValue: 3}, "both 3"},
	} {
		if _, err := c.out.Resolve(true); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want %q", c.out, err, c.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	l, err := Bus{URL: "rtu:///dev/ttyUSB0", Parity: ParityEven}.Resolve()
	if want := (Link{RTU: true, Address: "/dev/ttyUSB0", Baud: 9600, Parity: ParityEven, StopBits: 1, Timeout: DefaultTimeout, Settle: DefaultSettle}); err != nil || l != want {
		t.Errorf("Resolve = %+v, %v; want %+v", l, err, want)
	}
	l, err = Bus{URL: "tcp://10.0.0.7:502", Timeout: time.Second, Settle: 8 * time.Second}.Resolve()
	if want := (Link{Address: "10.0.0.7:502", Timeout: time.Second, Settle: 8 * time.Second}); err != nil || l != want {
		t.Errorf("Resolve = %+v, %v; want %+v", l, err, want)
	}
	o, err := Output{Unit: 0, Table: HoldingRegisters, Address: 4}.Resolve(false)
	if want := (Output{Table: HoldingRegisters, Address: 4, OnValue: 1}); err != nil || o != want {
		t.Errorf("Resolve = %+v, %v; want %+v (unit 0 is fine over TCP)", o, err, want)
	}
}
