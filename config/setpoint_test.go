package config

import (
	"strings"
	"testing"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
)

func TestSetpointConfig(t *testing.T) {
	c, err := Parse([]byte(modbusBase + `actuators:
  - name: fan
    pwm: {chip: fe20c000.pwm, channel: 1, frequency: 25000, min_frequency: 100, max_frequency: 40000}
    min: 20
    max: 90.5
    max_rate: 2.5
    boot: 30
    safe_duty: 25
  - name: dimmer
    modbus: {bus: relays, unit: 1, register: 7, full: 1000}
  - name: valve
    kind: setpoint
    pwm: {chip: 3f20c000.pwm}
    boot: off
`))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Specs()
	fan, dimmer, valve := s[0], s[1], s[2]
	if fan.Kind != actuator.KindSetpoint || fan.PinName != "pwm/fe20c000.pwm/1" || fan.Min != 2000 || fan.Max != 9050 || fan.MaxRate != 250 ||
		fan.Boot != actuator.BootDuty || fan.BootDuty != 3000 || fan.SafeDuty != 2500 || fan.MinFrequency != 100 || fan.MaxFrequency != 40000 {
		t.Errorf("fan = %+v", fan)
	}
	if dimmer.Kind != actuator.KindSetpoint || dimmer.PinName != "modbus/relays/1/register/7" || c.Actuators[1].Modbus.Conf().Full != 1000 || dimmer.Poll == 0 {
		t.Errorf("dimmer = %+v, %+v", dimmer, c.Actuators[1].Modbus.Conf())
	}
	if valve.Kind != actuator.KindSetpoint || valve.Boot != actuator.BootOff || c.Actuators[2].PWM.Conf().Frequency != 1000 {
		t.Errorf("valve = %+v", valve)
	}
	if fan.Max != fence.Duty(9050) {
		t.Errorf("max 90.5 = %d", fan.Max)
	}
}

func TestSetpointConfigErrors(t *testing.T) {
	for _, c := range []struct{ yaml, says string }{
		{"  - name: a\n    pwm: {chip: fe20c000.pwm}\n    min: 150\n", "line 17: min in actuator \"a\" is \"150\", not a percent"},
		{"  - name: a\n    pwm: {chip: fe20c000.pwm}\n    max: fast\n", "not a percent"},
		{"  - name: a\n    pwm: {chip: fe20c000.pwm}\n    max_rate: 1.125\n", "not a percent"},
		{"  - name: a\n    pwm: {chip: fe20c000.pwm, frequency: -5}\n", "frequency -5"},
		{"  - name: a\n    pwm: {channel: 0}\n", "chip is required"},
		{"  - name: a\n    pwm: {chip: fe20c000.pwm, max_frequency: 100}\n", "give both or neither"},
		{"  - name: a\n    pwm: {chip: fe20c000.pwm, min_frequency: 500, max_frequency: 100}\n", "min_frequency 500"},
		{"  - name: a\n    pwm: {chip: fe20c000.pwm}\n    pin: GPIO17\n", "keep one"},
		{"  - name: a\n    pwm: {chip: fe20c000.pwm}\n    kind: pulse\n", "takes set-points"},
		{"  - name: a\n    pin: GPIO17\n    kind: setpoint\n", "needs an output that takes set-points"},
		{"  - name: a\n    pin: GPIO17\n    min: 20\n", "for set-point outputs"},
		{"  - name: a\n    pin: GPIO17\n    boot: 30\n", "boot"},
		{"  - name: a\n    pwm: {chip: fe20c000.pwm}\n    min: 20\n    boot: 10\n", "outside its range"},
		{"  - name: a\n    pwm: {chip: fe20c000.pwm}\n    boot: on\n", "boot: on"},
		{"  - name: a\n    pwm: {chip: fe20c000.pwm}\n  - name: b\n    pwm: {chip: fe20c000.pwm}\n", "already used"},
		{"  - name: a\n    modbus: {bus: relays, unit: 1, register: 7, full: 0}\n", "full 0"},
		{"  - name: a\n    modbus: {bus: relays, unit: 1, register: 7, full: 1000, on_value: 1, off_value: 0}\n", "full"},
		{"  - name: a\n    modbus: {bus: relays, unit: 1, coil: 7, full: 1000}\n", "not a coil"},
	} {
		_, err := Parse([]byte(modbusBase + "actuators:\n" + c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want an error saying %q", c.yaml, err, c.says)
		}
	}
}
