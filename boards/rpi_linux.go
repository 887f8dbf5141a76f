package boards

import (
	"fmt"
	"strings"
	"sync"

	"periph.io/x/conn/v3/driver/driverreg"
	"periph.io/x/conn/v3/gpio"
	"periph.io/x/host/v3/gpioioctl"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards/pinmap"
)

// RaspberryPi is an open set of output lines on a Raspberry Pi, driven
// through the kernel's GPIO character device (periph's gpioioctl driver,
// which also works on the Pi 5's RP1 chip).
//
// All outputs are requested in one line request. Levels are read back with
// GET_VALUES on that same request, never with periph's GPIOLine.Read, which
// would turn an output into an input with a pull-up and drop a relay.
type RaspberryPi struct {
	Model pinmap.Model
	Chip  string // the GPIO chip's label

	mu    sync.Mutex // serialises Out and Read on the line set
	set   *gpioioctl.LineSet
	index map[string]int // canonical pin name → offset in set
}

var initOnce sync.Once
var initErr error

// OpenRaspberryPi requests the given output lines on model's GPIO chip and
// drives each to its initial level.
//
// The kernel's line request makes a line an output at low level; the
// initial levels are set right after, in the next system call. A relay does
// not react within those microseconds, but a fast input watching the line
// could see a low pulse on lines whose initial level is high.
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
	cfg := &gpioioctl.LineSetConfig{DefaultDirection: gpioioctl.LineOutput, DefaultEdge: gpio.NoEdge, DefaultPull: gpio.PullNoChange}
	var bits gpio.GPIOValue
	for i, o := range outs {
		name, err := pinmap.Canonical(o.Pin)
		if err != nil {
			return nil, err
		}
		if _, dup := p.index[name]; dup {
			return nil, fmt.Errorf("boards: %s is opened twice", pinmap.Describe(name))
		}
		if chip.ByName(name) == nil {
			return nil, notHere(fmt.Errorf("boards: %s: chip %s has no line named %s", model.Name, chip.Label(), name))
		}
		p.index[name] = i
		cfg.Lines = append(cfg.Lines, name)
		if o.InitialHigh {
			bits |= 1 << i
		}
	}
	if len(cfg.Lines) == 0 {
		return p, nil
	}
	set, err := chip.LineSetFromConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("boards: request %s on %s: %w (is another program using these lines?)", strings.Join(cfg.Lines, ", "), chip.Label(), err)
	}
	if err := set.Out(bits, 0); err != nil {
		set.Close()
		return nil, fmt.Errorf("boards: set initial levels: %w", err)
	}
	p.set = set
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
	return &rpiPin{board: p, name: g, bit: gpio.GPIOValue(1) << i}, nil
}

// Close implements Board: it releases the lines, which the kernel leaves
// at their last level.
func (p *RaspberryPi) Close() error {
	if p.set == nil {
		return nil
	}
	return p.set.Close()
}

type rpiPin struct {
	board *RaspberryPi
	name  string
	bit   gpio.GPIOValue
}

func (r *rpiPin) String() string { return r.board.Model.Name + " " + pinmap.Describe(r.name) }

// Out implements actuator.Pin.
func (r *rpiPin) Out(high bool) error {
	r.board.mu.Lock()
	defer r.board.mu.Unlock()
	var v gpio.GPIOValue
	if high {
		v = r.bit
	}
	if err := r.board.set.Out(v, r.bit); err != nil {
		return fmt.Errorf("boards: drive %s: %w", pinmap.Describe(r.name), err)
	}
	return nil
}

// Level implements actuator.Pin: GET_VALUES on the output request, which leaves the
// line an output.
func (r *rpiPin) Level() (bool, error) {
	r.board.mu.Lock()
	defer r.board.mu.Unlock()
	v, err := r.board.set.Read(r.bit)
	if err != nil {
		return false, fmt.Errorf("boards: read %s: %w", pinmap.Describe(r.name), err)
	}
	return v&r.bit != 0, nil
}
