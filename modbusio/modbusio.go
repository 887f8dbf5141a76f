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
//
// A write that timed out may still be carried out: Modbus cannot recall a
// request already sent, and a slow device works through it after the
// gateway stopped waiting. So the bus does not send anything else to the
// device until it knows: it settles (Bus.settleLocked) by reading the
// output back on the same connection (TCP) or line (RTU), which a device
// answers only after the requests before it, until a read is answered or
// modbusconf.Link.Settle has passed. A newer write therefore never goes
// before the late one on a device that answers within Settle. A late
// write found (by the settling read, or by a later read within
// lateHorizon if the settling gave up) is reported to the output's
// OnLateWrite hook as the gateway's own, not as a change behind its back.
package modbusio

import (
	"errors"
	"fmt"
	"io"
	"log"
	"sync"
	"time"

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
	conf   modbus.ClientConfiguration
	name   string        // the URL, for errors
	rtu    bool          // a serial line, whose units are 1 to 247
	settle time.Duration // how long a timed-out write is waited for

	mu      sync.Mutex           // one request at a time
	mc      *modbus.ModbusClient // nil while closed
	pending *lateWrite           // a write that timed out, not settled yet
	// silent: the last settling had no answer within settle, and nothing
	// was answered since: the device is taken as off, and a write that
	// times out is settled by one read, not waited for again.
	silent bool
}

// lateWrite is a write of the gateway's that timed out: it may still be
// carried out.
type lateWrite struct {
	out          *Output
	value        uint16 // what it writes (a coil: 1 or 0)
	before       uint16 // the output's value as last known before it
	known        bool   // whether before is known
	sent, failed time.Time
}

// lateHorizon is how long after it was sent a write that timed out and
// was not settled is still taken as the cause of its value found on its
// output: a later change is another's.
const lateHorizon = time.Minute

// testSettling, if set, is called when a bus starts settling a write to
// o that timed out, before its first read (a test hook).
var testSettling func(o *Output)

// NewBus returns the bus c describes; nothing is opened until a request.
func NewBus(c modbusconf.Bus) (*Bus, error) {
	l, err := c.Resolve()
	if err != nil {
		return nil, err
	}
	return &Bus{conf: client(l), name: c.URL, rtu: l.RTU, settle: l.Settle}, nil
}

// request runs f on the bus for unit, opening the connection if it is
// closed, and closes it again if f failed other than by the device's own
// refusal (a Modbus exception), so that the next request starts afresh;
// but with keep a timed-out request keeps it: a write may still be
// carried out, and the device answers the next request on the same
// connection only after it (settleLocked). b.mu must be held.
func (b *Bus) request(unit uint8, f func(mc *modbus.ModbusClient) error, keep bool) error {
	if b.mc == nil {
		mc, err := modbus.NewClient(&b.conf)
		if err == nil {
			err = mc.Open()
		}
		if err != nil {
			return fmt.Errorf("modbus %s: %w: %w", b.name, errCannotConnect, err)
		}
		b.mc = mc
	}
	if err := b.mc.SetUnitId(unit); err != nil {
		return err
	}
	err := f(b.mc)
	if err == nil || isException(err) {
		b.silent = false
	}
	if err != nil && !isException(err) && !(keep && errors.Is(err, modbus.ErrRequestTimedOut)) {
		b.closeLocked()
	}
	return err
}

func (b *Bus) closeLocked() error {
	if b.mc == nil {
		return nil
	}
	err := b.mc.Close()
	b.mc = nil
	return err
}

// write writes value to o with f, noting a write that timed out as
// pending: the next request on the bus settles it first.
func (b *Bus) write(o *Output, value uint16, f func(mc *modbus.ModbusClient) error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settleLocked()
	sent := time.Now()
	err := b.request(o.conf.Unit, f, true)
	switch {
	case err == nil:
		o.last, o.known = value, true
	case errors.Is(err, modbus.ErrRequestTimedOut):
		b.pending = &lateWrite{out: o, value: value, before: o.last, known: o.known, sent: sent, failed: time.Now()}
	}
	return err
}

// settleLocked waits, before any other request, for the write that timed
// out (b.pending) to be carried out or known never to be: it reads the
// write's output back on the connection the write went on (TCP) or the
// line (RTU) until a read is answered. A device takes a connection's
// requests one after the other, as an RTU module takes the line's, so
// the answer comes only after the late write was carried out, if it ever
// is: the value read is the late write's doing, and whatever the caller
// sends next goes after it. If the connection broke (TCP: a new one
// proves nothing), reads go on until one finds the write's value; if no
// proof comes within Settle of the time-out, the bus drops the
// connection, dials afresh and goes on, and the write stays noted on its
// output for lateHorizon, so that a later read that finds its value
// reports it as the gateway's own late write. b.mu must be held.
func (b *Bus) settleLocked() {
	p := b.pending
	if p == nil {
		return
	}
	b.pending = nil
	if testSettling != nil {
		testSettling(p.out)
	}
	o := p.out
	deadline := p.failed.Add(b.settle)
	if b.silent {
		deadline = p.failed // one read
	}
	proof := true
	for {
		v, err := o.readLocked(true)
		switch {
		case err == nil && (proof || v == p.value):
			o.settled(p, v)
			return
		case isException(err):
			return // the device answered after the write: it refused the read
		case err != nil && !errors.Is(err, modbus.ErrRequestTimedOut):
			// The link broke (the connection is closed), or an RTU module
			// answered the late write's request (a wrong function code):
			// on a serial line the next read still proves it.
			if !b.rtu {
				proof = false
			}
			if errors.Is(err, errCannotConnect) {
				o.maybeLate = p
				return
			}
		}
		if time.Now().After(deadline) {
			b.closeLocked() // dropped; the next request dials afresh
			o.maybeLate, b.silent = p, true
			return
		}
		if !errors.Is(err, modbus.ErrRequestTimedOut) {
			// Answered without proof (a new connection), or a broken
			// link: look again shortly, not in a tight loop.
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Close closes the bus's connection, if open.
func (b *Bus) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closeLocked()
}

// errCannotConnect is a request's error when the bus could not be opened.
var errCannotConnect = errors.New("cannot connect")

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

	// Guarded by bus.mu:
	last      uint16     // the value last written or read
	known     bool       // whether last is known
	maybeLate *lateWrite // a timed-out write not settled: it may land yet
	onLate    func(why string)
	lates     uint64
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

// OnLateWrite sets f to be told, with what happened, whenever a write of
// the gateway's to o that timed out is found to have been carried out
// after all: the gateway's own late write, not a change behind its back.
// f is called while the bus is held: it must not use the bus.
func (o *Output) OnLateWrite(f func(why string)) {
	o.bus.mu.Lock()
	defer o.bus.mu.Unlock()
	o.onLate = f
}

// LateWrites counts the gateway's own late writes found on o.
func (o *Output) LateWrites() uint64 {
	o.bus.mu.Lock()
	defer o.bus.mu.Unlock()
	return o.lates
}

// late reports p, found carried out (the output holds v). bus.mu must be
// held.
func (o *Output) late(p *lateWrite, v uint16) {
	o.lates++
	if o.onLate != nil {
		o.onLate(fmt.Sprintf("%s: the gateway's own write of %s, sent at %s and failed as timed out after %v, was carried out late (found %v after it was sent)",
			o, o.describe(v), p.sent.Format("15:04:05.000"), p.failed.Sub(p.sent).Round(time.Millisecond), time.Since(p.sent).Round(time.Millisecond)))
	}
}

// settled is the end of a settling of p: o read v once every request
// before was done. bus.mu must be held.
func (o *Output) settled(p *lateWrite, v uint16) {
	if v == p.value && !(p.known && p.before == v) {
		o.late(p, v)
	}
	o.last, o.known = v, true
}

// describe names a value of o: on, off, or the register's value.
func (o *Output) describe(v uint16) string {
	switch {
	case o.conf.Table == modbusconf.Coils:
		return map[bool]string{true: "on", false: "off"}[v != 0]
	case o.conf.Full != 0:
		return fmt.Sprintf("set-point %d of %d", v, o.conf.Full)
	case v == o.conf.OnValue:
		return fmt.Sprintf("on (%d)", v)
	case v == o.conf.OffValue:
		return fmt.Sprintf("off (%d)", v)
	}
	return fmt.Sprint(v)
}

// readLocked reads o's value: a coil's as 1 or 0; with keep, a time-out
// keeps the connection (settleLocked). bus.mu must be held.
func (o *Output) readLocked(keep bool) (v uint16, err error) {
	err = o.bus.request(o.conf.Unit, func(mc *modbus.ModbusClient) error {
		if o.conf.Table == modbusconf.Coils {
			c, err := mc.ReadCoil(o.conf.Address)
			if c {
				v = 1
			}
			return err
		}
		v, err = mc.ReadRegister(o.conf.Address, modbus.HOLDING_REGISTER)
		return err
	}, keep)
	return v, err
}

// read reads o's value once the bus is settled, and reports a timed-out
// write of o's that was not settled if the value is its doing.
func (o *Output) read() (uint16, error) {
	b := o.bus
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settleLocked()
	v, err := o.readLocked(false)
	if err != nil {
		return 0, err
	}
	if l := o.maybeLate; l != nil {
		switch {
		case time.Since(l.sent) > lateHorizon:
			o.maybeLate = nil
		case v == l.value && !(o.known && o.last == v):
			o.maybeLate = nil
			o.late(l, v)
		}
	}
	o.last, o.known = v, true
	return v, nil
}

// Out writes the output: on (high) or off.
func (o *Output) Out(high bool) error {
	var v uint16
	switch {
	case o.conf.Table == modbusconf.Coils && high:
		v = 1
	case o.conf.Table == modbusconf.Coils:
	case high:
		v = o.conf.OnValue
	default:
		v = o.conf.OffValue
	}
	err := o.bus.write(o, v, func(mc *modbus.ModbusClient) error {
		if o.conf.Table == modbusconf.Coils {
			return mc.WriteCoil(o.conf.Address, high)
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
	v, err := o.read()
	if err == nil && o.conf.Table != modbusconf.Coils {
		switch v {
		case o.conf.OnValue:
		case o.conf.OffValue:
		default:
			err = valueError{v, o.conf.OnValue, o.conf.OffValue}
		}
	}
	if err != nil {
		return false, fmt.Errorf("%s: read: %w", o, err)
	}
	if o.conf.Table == modbusconf.Coils {
		return v != 0, nil
	}
	return v == o.conf.OnValue, nil
}

// SetDuty writes a set-point register (modbusconf.Output.Full): d's share
// of Full, to the nearest step.
func (o *Output) SetDuty(d fence.Duty) error {
	if o.conf.Full == 0 {
		return fmt.Errorf("%s: not a set-point register (no full:)", o)
	}
	v := o.value(d)
	err := o.bus.write(o, v, func(mc *modbus.ModbusClient) error {
		return mc.WriteRegister(o.conf.Address, v)
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
	v, err := o.read()
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
