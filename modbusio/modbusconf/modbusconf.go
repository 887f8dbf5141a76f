// Package modbusconf describes Modbus buses and the outputs on them as a
// configuration names them, and checks them, with the standard library
// only: checking a configuration never loads a Modbus client, as it never
// loads a GPIO driver. Package modbusio opens what it describes.
package modbusconf

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// DefaultTimeout is how long a request waits for its answer when the
// configuration sets none: a relay module on RS-485 at 9600 baud answers
// within tens of milliseconds, and a command waits for it under its
// scope's lock.
const DefaultTimeout = 500 * time.Millisecond

// DefaultSettle is how long, after a write timed out, the gateway waits
// for the device to show whether it carried the write out late, before it
// sends the device anything else (package modbusio settles a bus): a
// device that answers within the timeout plus Settle never takes a newer
// write before an older one. It stays well under the watchdog's stall
// limit (15 s), as a command waits for it under its scope's lock.
const DefaultSettle = 5 * time.Second

// DefaultPoll is how often the gateway reads a Modbus output back when the
// configuration does not say: a module that lost power (and its coils),
// another master or a button on the board changed it behind the
// gateway's back, and a device that stopped answering is retried.
const DefaultPoll = 2 * time.Second

// Name is the canonical name of output o on the bus named bus: unique per
// output, "modbus/relays/1/coil/3", as a pin's name is per line.
func Name(bus string, o Output) string {
	return fmt.Sprintf("modbus/%s/%d/%s/%d", bus, o.Unit, o.Table, o.Address)
}

// Parity is a serial line's parity.
type Parity string

// The parities of a serial line.
const (
	ParityNone Parity = "none"
	ParityEven Parity = "even"
	ParityOdd  Parity = "odd"
)

// Bus says how to reach a bus: one TCP connection, or one serial port
// shared by every unit on it.
type Bus struct {
	// URL is tcp://HOST:PORT for Modbus TCP, or rtu:///dev/ttyUSB0 (rtu://
	// and the serial port's path) for Modbus RTU.
	URL string
	// Baud, Parity and StopBits set an RTU bus's serial line; zero values
	// mean 9600 baud, no parity and the stop bits Modbus asks for (two
	// without parity, one with).
	Baud     uint
	Parity   Parity
	StopBits uint
	// Timeout is how long a request waits for its answer; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// Settle is how long after a write timed out the bus waits to learn
	// whether the device carried it out late, before anything else goes
	// to the device; 0 means DefaultSettle.
	Settle time.Duration
}

// Link is a Bus resolved: every default filled in.
type Link struct {
	RTU      bool   // a serial line; else TCP
	Address  string // HOST:PORT, or the serial port's path
	Baud     uint   // RTU only
	Parity   Parity // RTU only
	StopBits uint   // RTU only
	Timeout  time.Duration
	Settle   time.Duration
}

// Resolve checks b and fills in its defaults; its error says what is
// wrong and how to write it.
func (b Bus) Resolve() (Link, error) {
	u, err := url.Parse(b.URL)
	if err != nil || b.URL == "" {
		return Link{}, fmt.Errorf("url %q: want tcp://HOST:PORT or rtu:///dev/SERIALPORT", b.URL)
	}
	l := Link{Timeout: b.Timeout}
	if l.Timeout == 0 {
		l.Timeout = DefaultTimeout
	}
	if l.Timeout < 0 {
		return Link{}, fmt.Errorf("timeout %v: want a positive duration", b.Timeout)
	}
	l.Settle = b.Settle
	if l.Settle <= 0 {
		l.Settle = DefaultSettle
	}
	switch u.Scheme {
	case "tcp":
		if u.Host == "" || u.Port() == "" || u.Path != "" {
			return Link{}, fmt.Errorf("url %q: want tcp://HOST:PORT (Modbus TCP's port is usually 502)", b.URL)
		}
		if b.Baud != 0 || b.Parity != "" || b.StopBits != 0 {
			return Link{}, fmt.Errorf("url %q: baud, parity and stop_bits are for rtu:// buses", b.URL)
		}
		l.Address = u.Host
	case "rtu":
		if u.Host != "" || u.Path == "" {
			return Link{}, fmt.Errorf("url %q: want rtu:///dev/SERIALPORT (three slashes: rtu:// and the port's path)", b.URL)
		}
		l.RTU, l.Address, l.Baud = true, u.Path, b.Baud
		if l.Baud == 0 {
			l.Baud = 9600
		}
		switch b.Parity {
		case "", ParityNone:
			l.Parity, l.StopBits = ParityNone, 2
		case ParityEven, ParityOdd:
			l.Parity, l.StopBits = b.Parity, 1
		default:
			return Link{}, fmt.Errorf("parity %q: want none, even or odd", b.Parity)
		}
		switch b.StopBits {
		case 0:
		case 1, 2:
			l.StopBits = b.StopBits
		default:
			return Link{}, fmt.Errorf("stop_bits %d: want 1 or 2", b.StopBits)
		}
	default:
		return Link{}, fmt.Errorf("url %q: want tcp://HOST:PORT or rtu:///dev/SERIALPORT", b.URL)
	}
	return l, nil
}

// Table is where an output lives on its device.
type Table string

// The tables an output may be in.
const (
	// Coils are single bits, written with function 5 and read with 1.
	Coils Table = "coil"
	// HoldingRegisters used as coils (as many relay modules do): written
	// with function 6, the output on at Output.OnValue.
	HoldingRegisters Table = "register"
)

// Output is one output on a device of a bus.
type Output struct {
	Unit    uint8  // the device's unit id (slave address): 1 to 247 on RTU
	Table   Table  // Coils or HoldingRegisters
	Address uint16 // the coil's or the register's address, from 0
	// OnValue and OffValue are what a holding register holds for on and
	// for off (HoldingRegisters only); both zero means 1 and 0.
	OnValue, OffValue uint16
	// Full, if not zero, makes a holding register a set-point: it holds
	// Full at 100 % and a share of it below (a dimmer at 0..1000, a valve
	// at 0..10000, an 8-bit PWM at 0..255).
	Full uint16
}

// Resolve checks o, on an RTU bus if rtu, and fills in its defaults.
func (o Output) Resolve(rtu bool) (Output, error) {
	if rtu && (o.Unit < 1 || o.Unit > 247) {
		return o, fmt.Errorf("unit %d: an RTU device's unit id is 1 to 247 (0 is broadcast, which no device answers)", o.Unit)
	}
	switch o.Table {
	case Coils:
		if o.OnValue != 0 || o.OffValue != 0 {
			return o, errors.New("on_value and off_value are for holding registers")
		}
	case HoldingRegisters:
		if o.Full != 0 {
			if o.OnValue != 0 || o.OffValue != 0 {
				return o, errors.New("on_value and off_value are for a register used as a coil; a set-point register has full (its value at 100 %) instead")
			}
			return o, nil
		}
		if o.OnValue == o.OffValue {
			if o.OnValue != 0 {
				return o, fmt.Errorf("on_value and off_value are both %d: want two values", o.OnValue)
			}
			o.OnValue = 1
		}
	default:
		return o, fmt.Errorf("table %q: want coil or register", o.Table)
	}
	return o, nil
}
