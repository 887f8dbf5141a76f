package config

import (
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/modbusio/modbusconf"
)

const modbusBase = base + `modbus:
  - name: relays
    url: tcp://10.0.0.7:502
  - name: rs485
    url: rtu:///dev/ttyUSB0
    baud: 19200
    parity: even
    poll: 1s
`

func TestModbusConfig(t *testing.T) {
	c, err := Parse([]byte(modbusBase + `actuators:
  - name: pump
    pin: GPIO17
  - name: fan
    modbus: {bus: relays, unit: 1, coil: 3}
  - name: heater
    modbus: {bus: rs485, unit: 2, register: 0, on_value: 256, off_value: 512}
  - name: light
    modbus: {bus: rs485, unit: 2, register: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	specs := c.Specs()
	for i, want := range []struct {
		pin  string
		poll time.Duration
	}{
		{"GPIO17", 0},
		{"modbus/relays/1/coil/3", modbusconf.DefaultPoll},
		{"modbus/rs485/2/register/0", time.Second},
		{"modbus/rs485/2/register/1", time.Second},
	} {
		if specs[i].PinName != want.pin || specs[i].Poll != want.poll {
			t.Errorf("%s: pin %q poll %v; want %q, %v", specs[i].Name, specs[i].PinName, specs[i].Poll, want.pin, want.poll)
		}
	}
	heater := c.Actuators[2].Modbus.Conf()
	if heater.Table != modbusconf.HoldingRegisters || heater.Unit != 2 || heater.OnValue != 256 || heater.OffValue != 512 {
		t.Errorf("heater's output = %+v", heater)
	}
	if light := c.Actuators[3].Modbus.Conf(); light.OnValue != 1 || light.OffValue != 0 {
		t.Errorf("light's register values = %d/%d; want 1/0", light.OnValue, light.OffValue)
	}
	if b := c.Modbus[1].Conf(); b.Baud != 19200 || b.Parity != modbusconf.ParityEven {
		t.Errorf("rs485 = %+v", b)
	}
}

func TestModbusConfigErrors(t *testing.T) {
	act := func(m string) string { return "actuators:\n  - name: fan\n    modbus: " + m + "\n" }
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"no bus name", base + "modbus:\n  - url: tcp://h:502\n" + act("{bus: relays, unit: 1, coil: 0}"),
			[]string{"line 7", "name is required"}},
		{"duplicate bus", base + "modbus:\n  - {name: relays, url: tcp://h:502}\n  - {name: relays, url: tcp://g:502}\n" + act("{bus: relays, unit: 1, coil: 0}"),
			[]string{"line 8", `"relays"`, "already used at line 7"}},
		{"bad url", base + "modbus:\n  - {name: relays, url: udp://h:502}\n" + act("{bus: relays, unit: 1, coil: 0}"),
			[]string{"line 7", `modbus bus "relays"`, "udp://h:502"}},
		{"bad parity", base + "modbus:\n  - {name: rs485, url: rtu:///dev/ttyUSB0, parity: mark}\n" + act("{bus: rs485, unit: 1, coil: 0}"),
			[]string{"line 7", "mark"}},
		{"poll too short", base + "modbus:\n  - {name: relays, url: tcp://h:502, poll: 10ms}\n" + act("{bus: relays, unit: 1, coil: 0}"),
			[]string{"line 7", "poll 10ms", "100ms or more"}},
		{"unknown bus", modbusBase + act("{bus: relay, unit: 1, coil: 0}"),
			[]string{"line 16", `actuator "fan"`, `bus "relay" is not configured`}},
		{"no bus", modbusBase + act("{unit: 1, coil: 0}"),
			[]string{"line 16", "bus is required"}},
		{"pin and modbus", modbusBase + "actuators:\n  - name: fan\n    pin: GPIO17\n    modbus: {bus: relays, unit: 1, coil: 0}\n",
			[]string{"line 17", "modbus and pin", "keep one"}},
		{"coil and register", modbusBase + act("{bus: relays, unit: 1, coil: 0, register: 0}"),
			[]string{"coil and register both given"}},
		{"neither", modbusBase + act("{bus: relays, unit: 1}"),
			[]string{"coil or register is required"}},
		{"coil out of range", modbusBase + act("{bus: relays, unit: 1, coil: 65536}"),
			[]string{"line 16", "coil 65536", "0 to 65535"}},
		{"negative register", modbusBase + act("{bus: relays, unit: 1, register: -1}"),
			[]string{"register -1", "0 to 65535"}},
		{"values on a coil", modbusBase + act("{bus: relays, unit: 1, coil: 0, on_value: 1, off_value: 0}"),
			[]string{"on_value, off_value and full are for a register"}},
		{"one value", modbusBase + act("{bus: relays, unit: 1, register: 0, on_value: 256}"),
			[]string{"give on_value and off_value both"}},
		{"value out of range", modbusBase + act("{bus: relays, unit: 1, register: 0, on_value: 70000, off_value: 0}"),
			[]string{"on_value 70000", "0 to 65535"}},
		{"same values", modbusBase + act("{bus: relays, unit: 1, register: 0, on_value: 5, off_value: 5}"),
			[]string{"on_value and off_value are both 5"}},
		{"unit out of range", modbusBase + act("{bus: relays, unit: 300, coil: 0}"),
			[]string{"unit 300"}},
		{"unit 0 on RTU", modbusBase + act("{bus: rs485, unit: 0, coil: 0}"),
			[]string{"unit 0", "1 to 247"}},
		{"same output twice", modbusBase + act("{bus: relays, unit: 1, coil: 0}") + "  - name: pump\n    modbus: {bus: relays, unit: 1, coil: 0}\n",
			[]string{`"pump"`, `already used by "fan"`}},
		{"unknown modbus key", modbusBase + act("{bus: relays, unit: 1, coils: 0}"),
			[]string{`unknown key "coils"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			for _, f := range tt.want {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q lacks %q", err, f)
				}
			}
		})
	}
}
