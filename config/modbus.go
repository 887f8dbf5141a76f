package config

import (
	"fmt"
	"time"

	"github.com/fencegate/fencegate/modbusio/modbusconf"
)

// ModbusBus configures one Modbus bus: a Modbus TCP connection, or a serial
// port with Modbus RTU devices on it. Actuators name it by Name.
type ModbusBus struct {
	Name string `yaml:"name"`
	// URL is tcp://HOST:PORT, or rtu:///dev/ttyUSB0 for a serial port.
	URL string `yaml:"url"`
	// Baud, Parity and StopBits set an RTU bus's serial line (9600, none
	// and 2 if not given).
	Baud     uint   `yaml:"baud,omitempty"`
	Parity   string `yaml:"parity,omitempty"`
	StopBits uint   `yaml:"stop_bits,omitempty"`
	// Timeout is how long a request waits for its answer
	// (modbusconf.DefaultTimeout if not given).
	Timeout time.Duration `yaml:"timeout,omitempty"`
	// Poll is how often each output on the bus is read back
	// (modbusconf.DefaultPoll if not given).
	Poll time.Duration `yaml:"poll,omitempty"`

	link modbusconf.Link
}

// Conf is the bus as package modbusio opens it.
func (b *ModbusBus) Conf() modbusconf.Bus {
	return modbusconf.Bus{URL: b.URL, Baud: b.Baud, Parity: modbusconf.Parity(b.Parity), StopBits: b.StopBits, Timeout: b.Timeout}
}

// ModbusOutput puts an actuator's output on a device of a bus: a coil, or
// a holding register used as one (Register, with OnValue and OffValue).
type ModbusOutput struct {
	Bus  string `yaml:"bus"`
	Unit int    `yaml:"unit"`
	// Coil or Register is the output's address on the device, from 0:
	// exactly one of the two.
	Coil     *int `yaml:"coil,omitempty"`
	Register *int `yaml:"register,omitempty"`
	// OnValue and OffValue are what the register holds for on and for
	// off (1 and 0 if not given).
	OnValue  *int `yaml:"on_value,omitempty"`
	OffValue *int `yaml:"off_value,omitempty"`
	// Full makes the register a set-point: its value at 100 % (1000 for a
	// dimmer counting per mille, 255 for an 8-bit one).
	Full *int `yaml:"full,omitempty"`

	conf modbusconf.Output
}

// Conf is the output as package modbusio opens it, once the
// configuration is checked.
func (m *ModbusOutput) Conf() modbusconf.Output { return m.conf }

// checkModbus checks the buses; the actuators' Modbus outputs are checked
// with them (modbusOutput).
func (c *Config) checkModbus() []error {
	var errs []error
	names := nameSet{}
	for i := range c.Modbus {
		b := &c.Modbus[i]
		it := itemOf("modbus", "modbus bus", i, b.Name)
		if msg := names.check(b.Name, c.lines.of(it.path+".name"), "name is required (actuators name the bus by it)", false); msg != "" {
			errs = append(errs, it.errf("%s", msg))
		}
		l, err := b.Conf().Resolve()
		if err != nil {
			errs = append(errs, it.errf("%v", err))
		}
		b.link = l
		if b.Poll < 0 || (b.Poll > 0 && b.Poll < 100*time.Millisecond) {
			errs = append(errs, it.errf("poll %v: want 100ms or more (how often each output is read back; %v if not given)", b.Poll, modbusconf.DefaultPoll))
		}
	}
	return errs
}

// bus returns the bus named name, if configured.
func (c *Config) bus(name string) *ModbusBus {
	for i := range c.Modbus {
		if c.Modbus[i].Name == name {
			return &c.Modbus[i]
		}
	}
	return nil
}

// modbusOutput checks a's Modbus output against the buses, and returns it
// as configured, for messages, and its canonical name.
func (c *Config) modbusOutput(a *Actuator) (given, canonical string, err error) {
	m := a.Modbus
	if a.Pin != "" || a.Chip != "" || a.Line != "" {
		return "", "", fmt.Errorf("modbus and pin (or chip/line) both name the output: keep one")
	}
	b := c.bus(m.Bus)
	switch {
	case m.Bus == "":
		return "", "", fmt.Errorf("modbus: bus is required (the name of a bus under modbus:)")
	case b == nil:
		return "", "", fmt.Errorf("modbus: bus %q is not configured (add it under modbus:, with its url)", m.Bus)
	}
	o := modbusconf.Output{}
	switch {
	case m.Coil != nil && m.Register != nil:
		return "", "", fmt.Errorf("modbus: coil and register both given: an output is one coil, or one holding register")
	case m.Coil != nil:
		o.Table = modbusconf.Coils
		if err := address(&o, "coil", *m.Coil); err != nil {
			return "", "", err
		}
		if m.OnValue != nil || m.OffValue != nil || m.Full != nil {
			return "", "", fmt.Errorf("modbus: on_value, off_value and full are for a register, not a coil (a coil is on or off)")
		}
	case m.Register != nil:
		o.Table = modbusconf.HoldingRegisters
		if err := address(&o, "register", *m.Register); err != nil {
			return "", "", err
		}
		for _, v := range []struct {
			key string
			p   *int
			to  *uint16
		}{{"on_value", m.OnValue, &o.OnValue}, {"off_value", m.OffValue, &o.OffValue}} {
			if v.p == nil {
				continue
			}
			if *v.p < 0 || *v.p > 0xffff {
				return "", "", fmt.Errorf("modbus: %s %d: a register holds 0 to 65535", v.key, *v.p)
			}
			*v.to = uint16(*v.p)
		}
		if m.Full != nil {
			if *m.Full < 1 || *m.Full > 0xffff {
				return "", "", fmt.Errorf("modbus: full %d: the register's value at 100 %% is 1 to 65535", *m.Full)
			}
			o.Full = uint16(*m.Full)
		}
		if (m.OnValue == nil) != (m.OffValue == nil) {
			return "", "", fmt.Errorf("modbus: give on_value and off_value both, or neither (then on is 1 and off is 0)")
		}
	default:
		return "", "", fmt.Errorf("modbus: coil or register is required (the output's address on the device, from 0)")
	}
	if m.Unit < 0 || m.Unit > 255 {
		return "", "", fmt.Errorf("modbus: unit %d: a unit id is 0 to 255 (1 to 247 on an RTU bus)", m.Unit)
	}
	o.Unit = uint8(m.Unit)
	o, err = o.Resolve(b.link.RTU)
	if err != nil {
		return "", "", fmt.Errorf("modbus: %v", err)
	}
	m.conf = o
	a.poll = b.Poll
	if a.poll == 0 {
		a.poll = modbusconf.DefaultPoll
	}
	return fmt.Sprintf("%s %d of unit %d on bus %s", o.Table, o.Address, o.Unit, m.Bus), modbusconf.Name(m.Bus, o), nil
}

// address sets o's address from the configuration's value v of key.
func address(o *modbusconf.Output, key string, v int) error {
	if v < 0 || v > 0xffff {
		return fmt.Errorf("modbus: %s %d: an address is 0 to 65535 (as the device's manual numbers them from 0; a manual that counts from 1 means one less)", key, v)
	}
	o.Address = uint16(v)
	return nil
}
