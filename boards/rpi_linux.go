package boards

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"periph.io/x/conn/v3/driver/driverreg"
	"periph.io/x/host/v3/gpioioctl"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards/pinmap"
)

// RaspberryPi is an open set of output lines on a Raspberry Pi, driven
// through the kernel's GPIO character device, which also works on the
// Pi 5's RP1 chip. periph's gpioioctl driver finds the chip (by label) and
// the lines' offsets (by name); the lines are requested here
// (gpiocdev_linux.go), because periph's request cannot carry their
// initial levels.
//
// All outputs are requested in one line request. Levels are written with
// SET_VALUES and read back with GET_VALUES on that same request, never with
// periph's GPIOLine.Read, which would turn an output into an input with a
// pull-up and drop a relay.
type RaspberryPi struct {
	Model pinmap.Model
	Chip  string // the GPIO chip's label

	mu    sync.Mutex     // serialises Out, Level and Close on req
	req   *lineRequest   // nil when no lines were opened or after Close
	index map[string]int // canonical pin name → index in req
}

var initOnce sync.Once
var initErr error

// OpenRaspberryPi requests the given output lines on model's GPIO chip,
// each at its initial level.
//
// The levels are part of the line request, so the kernel sets each line's
// level before it makes the line an output: a line whose initial level is
// high is never low, not even for microseconds. That matters for an
// active-low output, whose high is off, and most for two of them in one
// interlock (a motor's two directions on solid-state relays or an H-bridge).
func OpenRaspberryPi(model pinmap.Model, outs []Line) (*RaspberryPi, error) {
	initOnce.Do(func() { _, initErr = driverreg.Init() })
	if initErr != nil {
		return nil, fmt.Errorf("boards: periph: %w", initErr)
	}
	chip := findChip(model)
	if chip == nil {
		var labels []string
		for _, c := range gpioioctl.Chips {
			labels = append(labels, c.Label())
		}
		return nil, notHere(fmt.Errorf("boards: %s: no GPIO chip labelled %s (found %v); is /dev/gpiochip* readable by this user (group gpio)?",
			model.Name, strings.Join(model.Chips, " or "), labels))
	}
	p := &RaspberryPi{Model: model, Chip: chip.Label(), index: map[string]int{}}
	if len(outs) > gpioV2LinesMax {
		return nil, fmt.Errorf("boards: %d outputs on one board; the kernel requests at most %d lines at once", len(outs), gpioV2LinesMax)
	}
	var names []string
	var offsets []uint32
	var high uint64
	for i, o := range outs {
		name, err := pinmap.Canonical(o.Pin)
		if err != nil {
			return nil, err
		}
		if _, dup := p.index[name]; dup {
			return nil, fmt.Errorf("boards: %s is opened twice", pinmap.Describe(name))
		}
		line := chip.ByName(name)
		if line == nil {
			return nil, notHere(fmt.Errorf("boards: %s: chip %s has no line named %s", model.Name, chip.Label(), name))
		}
		p.index[name] = i
		names = append(names, name)
		offsets = append(offsets, uint32(line.Number()))
		if o.InitialHigh {
			high |= 1 << i
		}
	}
	if len(offsets) == 0 {
		return p, nil
	}
	req, err := requestOutputs(chip.Path(), offsets, high)
	if err != nil {
		return nil, fmt.Errorf("boards: request %s on %s: %w (is another program using these lines?)", strings.Join(names, ", "), chip.Label(), err)
	}
	p.req = req
	return p, nil
}

// checkRaspberryPi finds model's GPIO chip and the lines, without
// requesting any.
func checkRaspberryPi(model pinmap.Model, lines []Line) (string, error) {
	initOnce.Do(func() { _, initErr = driverreg.Init() })
	if initErr != nil {
		return "", fmt.Errorf("boards: periph: %w", initErr)
	}
	chip := findChip(model)
	if chip == nil {
		return "", notHere(fmt.Errorf("boards: %s: no GPIO chip labelled %s; is /dev/gpiochip* readable by this user (group gpio)?",
			model.Name, strings.Join(model.Chips, " or ")))
	}
	for _, l := range lines {
		name, err := pinmap.Canonical(l.Pin)
		if err != nil {
			return "", err
		}
		if chip.ByName(name) == nil {
			return "", notHere(fmt.Errorf("boards: %s: chip %s has no line named %s", model.Name, chip.Label(), name))
		}
	}
	return fmt.Sprintf("%s, GPIO chip %s, %d lines", model.Name, chip.Label(), len(lines)), nil
}

func findChip(model pinmap.Model) *gpioioctl.GPIOChip {
	for _, label := range model.Chips {
		for _, c := range gpioioctl.Chips {
			if c.Label() == label {
				return c
			}
		}
	}
	// Unknown label (a different kernel): the chip that names GPIO17.
	for _, c := range gpioioctl.Chips {
		if c.ByName("GPIO17") != nil {
			return c
		}
	}
	return nil
}

// String implements Board.
func (p *RaspberryPi) String() string { return p.Model.Name + ", GPIO chip " + p.Chip }

// Pin implements Board.
func (p *RaspberryPi) Pin(name string) (actuator.Pin, error) {
	g, err := pinmap.Canonical(name)
	if err != nil {
		return nil, err
	}
	i, ok := p.index[g]
	if !ok {
		return nil, fmt.Errorf("boards: %s was not opened", pinmap.Describe(g))
	}
	return &rpiPin{board: p, name: g, bit: 1 << i}, nil
}

// Close implements Board: it releases the lines, which the kernel leaves
// at their last level. Closing again does nothing.
func (p *RaspberryPi) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.req == nil {
		return nil
	}
	err := p.req.close()
	p.req = nil
	if err != nil {
		return fmt.Errorf("boards: release the lines on %s: %w", p.Chip, err)
	}
	return nil
}

// errClosed is what a pin of a closed board says.
var errClosed = errors.New("the board is closed")

type rpiPin struct {
	board *RaspberryPi
	name  string
	bit   uint64 // the line's bit in the request
}

func (r *rpiPin) String() string { return r.board.Model.Name + " " + pinmap.Describe(r.name) }

// Out implements actuator.Pin: SET_VALUES on the output request, for this
// line only.
func (r *rpiPin) Out(high bool) error {
	r.board.mu.Lock()
	defer r.board.mu.Unlock()
	var v uint64
	if high {
		v = r.bit
	}
	err := errClosed
	if r.board.req != nil {
		err = r.board.req.set(v, r.bit)
	}
	if err != nil {
		return fmt.Errorf("boards: drive %s: %w", pinmap.Describe(r.name), err)
	}
	return nil
}

// Level implements actuator.Pin: GET_VALUES on the output request, which
// leaves the line an output.
func (r *rpiPin) Level() (bool, error) {
	r.board.mu.Lock()
	defer r.board.mu.Unlock()
	var v uint64
	err := errClosed
	if r.board.req != nil {
		v, err = r.board.req.get(r.bit)
	}
	if err != nil {
		return false, fmt.Errorf("boards: read %s: %w", pinmap.Describe(r.name), err)
	}
	return v != 0, nil
}
