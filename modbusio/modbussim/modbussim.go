// Package modbussim is a Modbus TCP relay module in this process: the
// library's own Modbus server in front of a table of coils and holding
// registers. The simulator puts one on the dashboard, and the tests drive
// fenced outputs through it over real Modbus TCP on loopback.
//
// It behaves as the modules people wire up do where the gateway can
// notice: a unit id it is not is refused as a Modbus TCP gateway refuses
// a unit that does not answer; an address beyond its table is an illegal
// data address; a power cut stops it answering and, when the power comes
// back, its outputs are all off; a button on the board (Set) changes an
// output behind the gateway's back.
package modbussim

import (
	"fmt"
	"io"
	"log"
	"sync"
	"time"

	"github.com/simonvetter/modbus"
)

// Size is the number of coils and of holding registers of a module.
const Size = 8

// Module is a relay module: unit Unit, Size coils and Size holding
// registers, served on one TCP address.
type Module struct {
	url  string
	unit uint8

	mu        sync.Mutex
	server    *modbus.ModbusServer // nil while its power is off
	coils     [Size]bool
	registers [Size]uint16
	delay     time.Duration // before each answer: a slow module
	stall     *stall        // the next request waits for its release
	writes    int
	log       []Write
}

// Write is a write the module carried out, when it did: a coil's value
// is 1 or 0.
type Write struct {
	At      time.Time
	Coil    bool // a coil's; else a holding register's
	Address uint16
	Value   uint16
	Stalled bool // held by Stall before it was carried out
}

// stall holds one request: arrived is closed when it comes, and it is
// carried out when release is closed.
type stall struct{ arrived, release chan struct{} }

// Start powers on a module with unit id unit, serving Modbus TCP on url
// ("tcp://127.0.0.1:5020").
func Start(url string, unit uint8) (*Module, error) {
	m := &Module{url: url, unit: unit}
	if err := m.PowerOn(); err != nil {
		return nil, err
	}
	return m, nil
}

// URL is where the module serves.
func (m *Module) URL() string { return m.url }

// PowerOn starts the module answering again, its outputs as the power
// cut left them: all off. It does nothing if it is on.
func (m *Module) PowerOn() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.server != nil {
		return nil
	}
	s, err := modbus.NewServer(&modbus.ServerConfiguration{URL: m.url, Timeout: time.Minute, MaxClients: 8,
		Logger: log.New(io.Discard, "", 0)}, handler{m})
	if err != nil {
		return fmt.Errorf("modbus module on %s: %w", m.url, err)
	}
	if err := s.Start(); err != nil {
		return fmt.Errorf("modbus module on %s: %w", m.url, err)
	}
	m.server = s
	return nil
}

// PowerCut stops the module answering and clears its outputs, as a relay
// module loses its coils with its power.
func (m *Module) PowerCut() {
	m.mu.Lock()
	s := m.server
	m.server = nil
	m.coils, m.registers = [Size]bool{}, [Size]uint16{}
	m.mu.Unlock()
	if s != nil {
		s.Stop()
	}
}

// Powered reports whether the module's power is on.
func (m *Module) Powered() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.server != nil
}

// Close cuts the power for good.
func (m *Module) Close() error {
	m.PowerCut()
	return nil
}

// Coil and Register read output i on the module's side.
func (m *Module) Coil(i int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.coils[i]
}

func (m *Module) Register(i int) uint16 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.registers[i]
}

// SetCoil and SetRegister change output i on the module's side: a button
// on the board, or another master.
func (m *Module) SetCoil(i int, v bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.coils[i] = v
}

func (m *Module) SetRegister(i int, v uint16) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.registers[i] = v
}

// SetDelay makes the module wait d before each answer.
func (m *Module) SetDelay(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.delay = d
}

// Stall makes the module hold the next write request it gets until
// release is called: a module busy for as long as a test wants. arrived
// is closed when the write has come. The requests after it on the same
// connection wait behind it, as a device takes them one at a time; other
// connections' are served meanwhile, as the library's server does.
func (m *Module) Stall() (arrived <-chan struct{}, release func()) {
	st := &stall{arrived: make(chan struct{}), release: make(chan struct{})}
	m.mu.Lock()
	m.stall = st
	m.mu.Unlock()
	var once sync.Once
	return st.arrived, func() { once.Do(func() { close(st.release) }) }
}

// Log is every write the module carried out, in order.
func (m *Module) Log() []Write {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Write(nil), m.log...)
}

// Writes counts the write requests the module carried out.
func (m *Module) Writes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes
}

// handler is the library's request handler for a module.
type handler struct{ m *Module }

func (h handler) HandleCoils(req *modbus.CoilsRequest) ([]bool, error) {
	return access(h.m, func(m *Module) []bool { return m.coils[:] }, req.UnitId, req.Addr, req.Quantity, req.IsWrite, req.Args)
}

func (h handler) HandleHoldingRegisters(req *modbus.HoldingRegistersRequest) ([]uint16, error) {
	return access(h.m, func(m *Module) []uint16 { return m.registers[:] }, req.UnitId, req.Addr, req.Quantity, req.IsWrite, req.Args)
}

func (handler) HandleDiscreteInputs(*modbus.DiscreteInputsRequest) ([]bool, error) {
	return nil, modbus.ErrIllegalFunction
}

func (handler) HandleInputRegisters(*modbus.InputRegistersRequest) ([]uint16, error) {
	return nil, modbus.ErrIllegalFunction
}

// access reads or writes quantity values of m's table from addr, as unit
// asked.
func access[T any](m *Module, table func(*Module) []T, unit uint8, addr, quantity uint16, write bool, args []T) ([]T, error) {
	m.mu.Lock()
	delay, st := m.delay, m.stall
	if write {
		m.stall = nil
	} else {
		st = nil
	}
	m.mu.Unlock()
	if st != nil {
		close(st.arrived)
		<-st.release
	}
	time.Sleep(delay)
	if unit != m.unit {
		return nil, modbus.ErrGWTargetFailedToRespond
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := table(m)
	if int(addr)+int(quantity) > len(t) {
		return nil, modbus.ErrIllegalDataAddress
	}
	if write {
		m.writes++
		at := time.Now()
		for i, a := range args {
			w := Write{At: at, Address: addr + uint16(i), Stalled: st != nil}
			switch v := any(a).(type) {
			case bool:
				w.Coil = true
				if v {
					w.Value = 1
				}
			case uint16:
				w.Value = v
			}
			m.log = append(m.log, w)
		}
		copy(t[addr:], args)
		return nil, nil
	}
	return append([]T(nil), t[addr:addr+quantity]...), nil
}
