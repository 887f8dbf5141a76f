package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/pwmio"
)

// Percent is a set-point in the configuration: a number of percent, 0 to
// 100, in steps of 0.01 (min: 20, max_rate: 2.5).
type Percent fence.Duty

// UnmarshalYAML reads a number of percent.
func (p *Percent) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		return fmt.Errorf("not a number of percent")
	}
	d, err := fence.ParseDuty(n.Value)
	if err != nil {
		return err
	}
	*p = Percent(d)
	return nil
}

func (p *Percent) duty() fence.Duty {
	if p == nil {
		return 0
	}
	return fence.Duty(*p)
}

// PWMOutput puts a set-point output on a PWM channel of the kernel
// (/sys/class/pwm).
type PWMOutput struct {
	// Chip is the PWM controller's device: 3f20c000.pwm on a Pi 3,
	// fe20c000.pwm on a Pi 4, 1f00098000.pwm on a Pi 5 (not pwmchipN,
	// whose number changes between kernels).
	Chip    string `yaml:"chip"`
	Channel int    `yaml:"channel,omitempty"`
	// Frequency in hertz; pwmio.DefaultFrequency if not given.
	Frequency int `yaml:"frequency,omitempty"`
	// MinFrequency and MaxFrequency let a command choose the frequency,
	// within them; without them it runs at Frequency.
	MinFrequency int `yaml:"min_frequency,omitempty"`
	MaxFrequency int `yaml:"max_frequency,omitempty"`
}

// Conf is the channel as package pwmio opens it.
func (p *PWMOutput) Conf() pwmio.Conf {
	c := pwmio.Conf{Chip: p.Chip, Channel: p.Channel, Frequency: p.Frequency}
	if c.Frequency == 0 {
		c.Frequency = pwmio.DefaultFrequency
	}
	return c
}

// pwmOutput checks a's PWM channel and returns it as configured, for
// messages, and its canonical name.
func pwmOutput(a *Actuator) (given, canonical string, err error) {
	if a.Pin != "" || a.Chip != "" || a.Line != "" || a.Modbus != nil {
		return "", "", fmt.Errorf("pwm and pin (or chip/line, or modbus) both name the output: keep one")
	}
	c := a.PWM.Conf()
	if err := c.Check(); err != nil {
		return "", "", fmt.Errorf("pwm: %v", err)
	}
	lo, hi := a.PWM.MinFrequency, a.PWM.MaxFrequency
	if (lo == 0) != (hi == 0) || lo < 0 || lo > hi || hi > pwmio.MaxFrequency {
		return "", "", fmt.Errorf("pwm: min_frequency %d and max_frequency %d: give both or neither, 1 <= min <= max <= %d (hertz)", lo, hi, pwmio.MaxFrequency)
	}
	return fmt.Sprintf("PWM channel %d of %s", c.Channel, c.Chip), c.Name(), nil
}

// IsSetpoint reports whether a's output takes set-points: a PWM channel,
// or a Modbus register with full:.
func (a *Actuator) IsSetpoint() bool {
	return a.PWM != nil || (a.Modbus != nil && a.Modbus.Full != nil)
}

// setpointKind makes a set-point output's kind setpoint, and takes a
// set-point at boot (boot: 30): what a set-point output's configuration
// says that a switch's would not. A problem is an error at its key.
func (a *Actuator) setpointKind() error {
	switch {
	case a.IsSetpoint() && a.Kind == "":
		a.Kind = string(actuator.KindSetpoint)
	case a.IsSetpoint() && a.Kind != string(actuator.KindSetpoint):
		return &actuator.SpecError{Actuator: a.Name, Field: "kind", Msg: fmt.Sprintf("kind %s, but its output takes set-points (pwm:, or a modbus register with full:): leave kind out, or write kind: setpoint", a.Kind)}
	case !a.IsSetpoint() && a.Kind == string(actuator.KindSetpoint):
		return &actuator.SpecError{Actuator: a.Name, Field: "kind", Msg: "kind: setpoint needs an output that takes set-points: pwm: {chip, channel, frequency}, or modbus: {bus, unit, register, full}"}
	}
	if a.Kind != string(actuator.KindSetpoint) {
		return nil
	}
	if d, err := fence.ParseDuty(a.Boot); err == nil {
		a.Boot, a.bootDuty = string(actuator.BootDuty), d
	}
	return nil
}
