// Package modbusio drives outputs on Modbus devices: the coils of relay
// modules, and the holding registers that many such modules use as coils,
// over Modbus TCP or Modbus RTU on a serial port.
//
// An [Output] has the methods of actuator.Pin: package actuator records
// a command's fence and state, then drives the output and reads it back,
// exactly as it does a GPIO line. A device that does not answer makes Out
// or Level fail with the reason; the record stays, as for a GPIO write
// that fails.
//
// A [Bus] is one connection (a TCP connection to a device or gateway, or
// one serial port) shared by every unit on it: Modbus is a request and
// an answer at a time, so the bus serialises its requests, and each
// names its unit. A connection that failed is closed and opened again at
// the next request, so a device that comes back is reached again without
// a restart.
package modbusio

import (
	"errors"
	"fmt"
	"io"
	"log"
	"sync"

	"github.com/simonvetter/modbus"

	"github.com/fencegate/fencegate/fence"

	"github.com/fencegate/fencegate/modbusio/modbusconf"
)

// client returns the library's configuration for l.
func client(l modbusconf.Link) modbus.ClientConfiguration {
	// The library logs every failed request to stdout itself; the gateway
	// reports them, once, where its operators look.
	conf := modbus.ClientConfiguration{URL: "tcp://" + l.Address, Timeout: l.Timeout, Logger: log.New(io.Discard, "", 0)}
	if l.RTU {
		conf.URL, conf.Speed, conf.DataBits, conf.StopBits = "rtu://"+l.Address, l.Baud, 8, l.StopBits
		conf.Parity = map[modbusconf.Parity]uint{modbusconf.ParityNone: modbus.PARITY_NONE,
			modbusconf.ParityEven: modbus.PARITY_EVEN, modbusconf.ParityOdd: modbus.PARITY_ODD}[l.Parity]
	}
	return conf
}

// Bus is one Modbus connection, opened at its first request.
type Bus struct {
	conf modbus.ClientConfiguration
	name string // the URL, for errors
	rtu  bool   // a serial line, whose units are 1 to 247

	mu sync.Mutex           // one request at a time
	mc *modbus.ModbusClient // nil while closed
}

// NewBus returns the bus c describes; nothing is opened until a request.
func NewBus(c modbusconf.Bus) (*Bus, error) {
	l, err := c.Resolve()
	if err != nil {
		return nil, err
	}
	return &Bus{conf: client(l), name: c.URL, rtu: l.RTU}, nil
}

// do runs f on the bus for unit, opening the connection if it is closed,
// and closes it again if f failed other than by the device's own refusal
// (a Modbus exception), so that the next request starts afresh.
func (b *Bus) do(unit uint8, f func(mc *modbus.ModbusClient) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mc == nil {
		mc, err := modbus.NewClient(&b.conf)
		if err == nil {
			err = mc.Open()
		}
		if err != nil {
			return fmt.Errorf("modbus %s: cannot connect: %w", b.name, err)
		}
		b.mc = mc
	}
	if err := b.mc.SetUnitId(unit); err != nil {
		return err
	}
	err := f(b.mc)
	var ve valueError
	if err != nil && !isException(err) && !errors.As(err, &ve) {
		b.mc.Close()
		b.mc = nil
	}
	return err
}

// Close closes the bus's connection, if open.
func (b *Bus) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mc == nil {
		return nil
	}
	err := b.mc.Close()
	b.mc = nil
	return err
}

// isException reports whether err is the device's answer refusing the
// request (an illegal address, a busy device): the link itself is fine.
func isException(err error) bool {
	switch {
	case errors.Is(err, modbus.ErrIllegalFunction), errors.Is(err, modbus.ErrIllegalDataAddress),
		errors.Is(err, modbus.ErrIllegalDataValue), errors.Is(err, modbus.ErrServerDeviceFailure),
		errors.Is(err, modbus.ErrAcknowledge), errors.Is(err, modbus.ErrServerDeviceBusy),
		errors.Is(err, modbus.ErrMemoryParityError):
		return true
	}
	return false
}

// valueError is a holding register's value that is neither on nor off:
// the device answered, so the link is fine.
type valueError struct{ value, on, off uint16 }

func (e valueError) Error() string {
	return fmt.Sprintf("the register holds %d, neither on (%d) nor off (%d)", e.value, e.on, e.off)
}

// NeitherLevel tells package actuator that the output answered at
// neither level: a watched output found so is driven, not marked down.
func (valueError) NeitherLevel() bool { return true }

// Output is one output on a device of a bus.
type Output struct {
	bus  *Bus
	conf modbusconf.Output
}

// Output returns the output c names on the bus. It checks c, but opens
// nothing.
func (b *Bus) Output(c modbusconf.Output) (*Output, error) {
	c, err := c.Resolve(b.rtu)
	if err != nil {
		return nil, err
	}
	return &Output{bus: b, conf: c}, nil
}

// String names the output for people: "tcp://10.0.0.7:502 unit 1 coil 3".
func (o *Output) String() string {
	return fmt.Sprintf("%s unit %d %s %d", o.bus.name, o.conf.Unit, o.conf.Table, o.conf.Address)
}

// Out writes the output: on (high) or off.
func (o *Output) Out(high bool) error {
	err := o.bus.do(o.conf.Unit, func(mc *modbus.ModbusClient) error {
		if o.conf.Table == modbusconf.Coils {
			return mc.WriteCoil(o.conf.Address, high)
		}
		v := o.conf.OffValue
		if high {
			v = o.conf.OnValue
		}
		return mc.WriteRegister(o.conf.Address, v)
	})
	if err != nil {
		return fmt.Errorf("%s: write: %w", o, err)
	}
	return nil
}

// Level reads the output back from the device.
func (o *Output) Level() (bool, error) {
	var high bool
	err := o.bus.do(o.conf.Unit, func(mc *modbus.ModbusClient) error {
		if o.conf.Table == modbusconf.Coils {
			v, err := mc.ReadCoil(o.conf.Address)
			high = v
			return err
		}
		v, err := mc.ReadRegister(o.conf.Address, modbus.HOLDING_REGISTER)
		if err != nil {
			return err
		}
		switch v {
		case o.conf.OnValue:
			high = true
		case o.conf.OffValue:
		default:
			return valueError{v, o.conf.OnValue, o.conf.OffValue}
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("%s: read: %w", o, err)
	}
	return high, nil
}

// SetDuty writes a set-point register (modbusconf.Output.Full): d's share
// of Full, to the nearest step.
func (o *Output) SetDuty(d fence.Duty) error {
	if o.conf.Full == 0 {
		return fmt.Errorf("%s: not a set-point register (no full:)", o)
	}
	err := o.bus.do(o.conf.Unit, func(mc *modbus.ModbusClient) error {
		return mc.WriteRegister(o.conf.Address, o.value(d))
	})
	if err != nil {
		return fmt.Errorf("%s: write: %w", o, err)
	}
	return nil
}

// Duty reads a set-point register back. A value above Full is neither a
// set-point nor off: an error with NeitherLevel, as for a register used
// as a coil that holds neither of its values.
func (o *Output) Duty() (fence.Duty, error) {
	var v uint16
	err := o.bus.do(o.conf.Unit, func(mc *modbus.ModbusClient) (err error) {
		v, err = mc.ReadRegister(o.conf.Address, modbus.HOLDING_REGISTER)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: read: %w", o, err)
	}
	if v > o.conf.Full {
		return 0, fmt.Errorf("%s: %w", o, fullError{v, o.conf.Full})
	}
	return o.duty(v), nil
}

// Nearest is the set-point the register holds after SetDuty(d): d, to
// the register's step (100 % / Full).
func (o *Output) Nearest(d fence.Duty) fence.Duty { return o.duty(o.value(d)) }

func (o *Output) value(d fence.Duty) uint16 {
	return uint16((uint32(d)*uint32(o.conf.Full) + uint32(fence.FullDuty)/2) / uint32(fence.FullDuty))
}

func (o *Output) duty(v uint16) fence.Duty {
	full := uint32(o.conf.Full)
	return fence.Duty((uint32(v)*uint32(fence.FullDuty) + full/2) / full)
}

// fullError is a set-point register's value above its full scale.
type fullError struct{ value, full uint16 }

func (e fullError) Error() string {
	return fmt.Sprintf("the register holds %d, above its full scale %d", e.value, e.full)
}

func (fullError) NeitherLevel() bool { return true }
