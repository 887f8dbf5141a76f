package boards

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"periph.io/x/conn/v3/driver/driverreg"
	"periph.io/x/host/v3/gpioioctl"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards/pinmap"
)

// RaspberryPi is an open set of output and input lines on a Raspberry
// Pi, driven and read through the kernel's GPIO character device, which
// also works on the Pi 5's RP1 chip and on any other GPIO chip the kernel
// exposes (I²C and SPI expanders). periph's gpioioctl driver finds the
// chips (by label, name or path) and the lines' offsets (by name); the
// lines are requested here (gpiocdev_linux.go), because periph's request
// cannot carry their initial levels.
//
// The outputs of each chip are requested in one line request. Levels are
// written with SET_VALUES and read back with GET_VALUES on that request,
// never with periph's GPIOLine.Read, which would turn an output into an
// input with a pull-up and drop a relay.
//
// The inputs of each chip are requested in another, with their bias, the
// kernel's debounce and edge detection; a goroutine for each reads the
// request's edge events and reports the changes (Options.OnInput). Level
// reads an input with GET_VALUES on its request.
type RaspberryPi struct {
	Model pinmap.Model
	Chip  string // the label of the GPIO chip carrying the header's lines

	mu      sync.Mutex         // serialises Out, Level and Close on reqs and ins
	reqs    []*heldRequest     // one per chip; req nil after Close
	index   map[string]lineRef // canonical name → its request and bit
	ins     []*heldRequest     // the input requests, one per chip
	inIndex map[string]lineRef // canonical name → its input request and bit

	opened  []Line       // the outputs OpenInputs was given, for TakeOver
	pending []*chipLines // their chips' lines, until TakeOver requests them

	onInput   func(InputEvent)
	deliverMu sync.Mutex  // serialises onInput
	closed    atomic.Bool // set by Close: no more onInput
	watchers  sync.WaitGroup
}

// heldRequest is one chip's line request.
type heldRequest struct {
	chip string // the chip's label, for messages
	req  *lineRequest
}

// lineRef is an opened line: its request and its bit in it.
type lineRef struct {
	req int
	bit uint64
}

var initOnce sync.Once
var initErr error

// OpenRaspberryPi requests the given output lines, each at its initial
// level: the header's pins on model's GPIO chip, chip lines on theirs.
//
// The levels are part of the line request, so the kernel sets each line's
// level before it makes the line an output: a line whose initial level is
// high is never low, not even for microseconds. That matters for an
// active-low output, whose high is off, and most for two of them in one
// interlock (a motor's two directions on solid-state relays or an H-bridge).
func OpenRaspberryPi(model pinmap.Model, outs []Line) (*RaspberryPi, error) {
	p, err := openRaspberryPi(model, Options{Lines: outs})
	if err != nil {
		return nil, err
	}
	if _, err := p.TakeOver(outs); err != nil {
		return nil, err
	}
	return p, nil
}

// openRaspberryPi finds o's outputs and inputs, requests the inputs and
// starts reporting their changes to o.OnInput (OpenInputs); TakeOver
// requests the outputs. Every line is found before any is requested.
func openRaspberryPi(model pinmap.Model, o Options) (*RaspberryPi, error) {
	header, groups, inGroups, err := resolveLines(model, o.Lines, o.Inputs)
	if err != nil {
		return nil, err
	}
	p := &RaspberryPi{Model: model, Chip: header.Label(), index: map[string]lineRef{}, inIndex: map[string]lineRef{}, onInput: o.OnInput,
		opened: o.Lines, pending: groups}
	var watches []func()
	for _, g := range inGroups {
		req, err := requestInputs(g.chip.Path(), g.offsets, g.settings())
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("boards: request inputs %s on %s: %w (is another program using these lines? does the chip give interrupts, for edge detection?)",
				strings.Join(g.names, ", "), g.chip.Label(), err)
		}
		all := uint64(1)<<len(g.offsets) - 1
		levels, err := req.get(all)
		if err != nil {
			req.close()
			p.Close()
			return nil, fmt.Errorf("boards: read inputs %s on %s: %w", strings.Join(g.names, ", "), g.chip.Label(), err)
		}
		for i, name := range g.names {
			p.inIndex[name] = lineRef{req: len(p.ins), bit: 1 << i}
		}
		p.ins = append(p.ins, &heldRequest{chip: g.chip.Label(), req: req})
		w := newInputWatch(g, levels)
		watches = append(watches, func() { p.watch(req, w) })
	}
	// The goroutines start once every input is requested: a failed open
	// reports nothing.
	for _, watch := range watches {
		p.watchers.Add(1)
		go watch()
	}
	return p, nil
}

// TakeOver implements Opening: it requests the outputs of each chip in
// one line request, with their initial levels.
func (p *RaspberryPi) TakeOver(lines []Line) (Board, error) {
	if err := sameLines(p.opened, lines); err != nil {
		p.Close()
		return nil, err
	}
	groups := p.pending
	p.pending = nil
	for _, g := range groups {
		var high uint64
		for bit, i := range g.lines {
			if lines[i].InitialHigh {
				high |= 1 << bit
			}
		}
		req, err := requestOutputs(g.chip.Path(), g.offsets, high)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("boards: request %s on %s: %w (is another program using these lines?)", strings.Join(g.names, ", "), g.chip.Label(), err)
		}
		p.mu.Lock()
		for i, name := range g.names {
			p.index[name] = lineRef{req: len(p.reqs), bit: 1 << i}
		}
		p.reqs = append(p.reqs, &heldRequest{chip: g.chip.Label(), req: req})
		p.mu.Unlock()
	}
	return p, nil
}

// chipLines are the lines to request on one chip.
type chipLines struct {
	chip    *gpioioctl.GPIOChip
	names   []string // canonical names, as Pin and Input take them
	offsets []uint32
	lines   []int       // outputs: index in the lines resolveLines was given
	inputs  []inputLine // inputs
}

// settings are the inputs' settings, in request order.
func (g *chipLines) settings() []InputLine {
	s := make([]InputLine, len(g.inputs))
	for i, in := range g.inputs {
		s[i] = in.InputLine
	}
	return s
}

// lineFinder finds lines on model's GPIO chips and sees that none is
// taken twice.
type lineFinder struct {
	model  pinmap.Model
	header *gpioioctl.GPIOChip
	taken  map[string]taker // chip path and offset → the line that took it
	groups map[string]*chipLines
}

// taker is a line as configured.
type taker struct {
	name, pin string // canonical, as configured
	input     bool
}

// find returns the chip and offset of the line pin names, and its group
// (new ones are added to *groups). It refuses a line already taken.
func (f *lineFinder) find(pin string, input bool, groups *[]*chipLines) (*chipLines, string, error) {
	name, err := pinmap.Canonical(pin)
	if err != nil {
		return nil, "", err
	}
	chip, offset := f.header, -1
	if chipRef, line, ok := pinmap.SplitChipLine(name); ok {
		if chip, err = findChipRef(chipRef); err != nil {
			return nil, "", err
		}
		n, byOffset := pinmap.LineOffset(line)
		if !byOffset {
			if gl := chip.ByName(line); gl != nil {
				n = gl.Number()
			} else {
				n = -1
			}
		}
		if n < 0 || n >= chip.LineCount() {
			return nil, "", notHere(fmt.Errorf("boards: GPIO chip %s (%s) has no line %s (it has offsets 0 to %d; gpioinfo %s lists their names)",
				chip.Label(), chip.Name(), line, chip.LineCount()-1, chip.Name()))
		}
		offset = n
	} else if gl := f.header.ByName(name); gl != nil {
		offset = gl.Number()
	} else {
		return nil, "", notHere(fmt.Errorf("boards: %s: chip %s has no line named %s", f.model.Name, f.header.Label(), name))
	}
	at := fmt.Sprintf("%s:%d", chip.Path(), offset)
	if other, dup := f.taken[at]; dup {
		line := fmt.Sprintf("offset %d of %s", offset, chip.Name())
		switch {
		case input && !other.input:
			return nil, "", bothWays(pin, other.pin, line)
		case !input && other.input:
			return nil, "", bothWays(other.pin, pin, line)
		}
		return nil, "", fmt.Errorf("boards: %s and %s are the same line (%s)", pinmap.Describe(other.name), pinmap.Describe(name), line)
	}
	f.taken[at] = taker{name: name, pin: pin, input: input}
	key := chip.Path()
	if input {
		key += " inputs"
	}
	g := f.groups[key]
	if g == nil {
		g = &chipLines{chip: chip}
		f.groups[key] = g
		*groups = append(*groups, g)
	}
	if len(g.offsets) == gpioV2LinesMax {
		what := "outputs"
		if input {
			what = "inputs"
		}
		return nil, "", fmt.Errorf("boards: more than %d %s on GPIO chip %s; the kernel requests at most %d lines at once", gpioV2LinesMax, what, chip.Label(), gpioV2LinesMax)
	}
	g.names = append(g.names, name)
	g.offsets = append(g.offsets, uint32(offset))
	return g, name, nil
}

// resolveLines finds model's header chip and the chip and offset of every
// output and input, grouped by chip in the order the lines come: outputs
// in groups, inputs in inGroups. No line may be taken twice.
func resolveLines(model pinmap.Model, lines []Line, ins []InputLine) (_ *gpioioctl.GPIOChip, groups, inGroups []*chipLines, _ error) {
	initOnce.Do(func() { _, initErr = driverreg.Init() })
	if initErr != nil {
		return nil, nil, nil, fmt.Errorf("boards: periph: %w", initErr)
	}
	header := findChip(model)
	if header == nil {
		return nil, nil, nil, notHere(fmt.Errorf("boards: %s: no GPIO chip labelled %s (found %s); is /dev/gpiochip* readable by this user (group gpio)?",
			model.Name, strings.Join(model.Chips, " or "), chipList()))
	}
	f := &lineFinder{model: model, header: header, taken: map[string]taker{}, groups: map[string]*chipLines{}}
	for i, l := range lines {
		g, _, err := f.find(l.Pin, false, &groups)
		if err != nil {
			return nil, nil, nil, err
		}
		g.lines = append(g.lines, i)
	}
	for i, in := range ins {
		in, err := checkInput(i, in)
		if err != nil {
			return nil, nil, nil, err
		}
		g, name, err := f.find(in.Pin, true, &inGroups)
		if err != nil {
			return nil, nil, nil, err
		}
		g.inputs = append(g.inputs, inputLine{InputLine: in, name: name, index: i})
	}
	for _, g := range inGroups {
		if _, err := inputConfig(g.settings()); err != nil {
			return nil, nil, nil, fmt.Errorf("%w (GPIO chip %s)", err, g.chip.Label())
		}
	}
	return header, groups, inGroups, nil
}

// checkRaspberryPi finds the GPIO chips and the lines, without requesting
// any, and warns about chips whose power-on level energises an output.
func checkRaspberryPi(model pinmap.Model, o Options) (Report, error) {
	header, groups, inGroups, err := resolveLines(model, o.Lines, o.Inputs)
	if err != nil {
		return Report{}, err
	}
	r := Report{Board: fmt.Sprintf("%s, GPIO chip %s, %d lines", model.Name, header.Label(), len(o.Lines))}
	if len(o.Inputs) > 0 {
		r.Board += fmt.Sprintf(" and %d inputs", len(o.Inputs))
	}
	for _, g := range groups {
		if g.chip != header {
			r.Board += fmt.Sprintf("; chip %s (%s): %d lines", g.chip.Label(), g.chip.Name(), len(g.lines))
		}
		for _, i := range g.lines {
			r.warn(i, g.chip.Label(), o.Lines[i].ActiveLow)
		}
	}
	for _, g := range inGroups {
		if g.chip != header {
			r.Board += fmt.Sprintf("; chip %s (%s): %d inputs", g.chip.Label(), g.chip.Name(), len(g.inputs))
		}
	}
	return r, nil
}

// findChipRef finds a GPIO chip by its name (gpiochip2), its path
// (/dev/gpiochip2) or its label (mcp23017); a label may carry the chip's
// address on its bus after @ (mcp23017@20: the one at I²C address 0x20),
// for two chips of one kind.
func findChipRef(ref string) (*gpioioctl.GPIOChip, error) {
	label, addr, byAddr := strings.Cut(ref, "@")
	var found []*gpioioctl.GPIOChip
	for _, c := range gpioioctl.Chips {
		if c.Name() == ref || c.Path() == ref {
			return c, nil
		}
		if c.Label() == label && (!byAddr || sameAddress(busAddress(sysGPIODevices, c.Name()), addr)) {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, notHere(fmt.Errorf("boards: no GPIO chip %s (found %s); is its overlay loaded (dtoverlay= in config.txt), and /dev/gpiochip* readable by this user (group gpio)?", ref, chipList()))
	}
	var names []string
	for _, c := range found {
		names = append(names, fmt.Sprintf("%s at %s", c.Name(), busAddress(sysGPIODevices, c.Name())))
	}
	return nil, notHere(fmt.Errorf("boards: %d GPIO chips are labelled %s (%s): add the address, e.g. chip: %s@20, so that a change in the order the kernel finds them cannot swap them",
		len(found), label, strings.Join(names, ", "), label))
}

// sysGPIODevices is where sysfs links each GPIO chip to its device.
const sysGPIODevices = "/sys/bus/gpio/devices"

// busAddress returns the device a GPIO chip belongs to, as its bus names
// it: "1-0020" for I²C address 0x20 on bus 1, "spi0.0", or "" if sysfs
// does not say.
func busAddress(sysDevices, chipName string) string {
	dev, err := filepath.EvalSymlinks(filepath.Join(sysDevices, chipName))
	if err != nil {
		return ""
	}
	return filepath.Base(filepath.Dir(dev))
}

// sameAddress reports whether a chip's device (busAddress) is at addr,
// an I²C address in hexadecimal (20, 0x20) or a device name (spi0.0).
func sameAddress(device, addr string) bool {
	if device == "" || addr == "" {
		return false
	}
	if device == addr {
		return true
	}
	_, hex, ok := strings.Cut(device, "-")
	if !ok {
		return false
	}
	a, err1 := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(addr), "0x"), 16, 16)
	d, err2 := strconv.ParseUint(hex, 16, 16)
	return err1 == nil && err2 == nil && a == d
}

// chipList lists the GPIO chips this machine has, for messages.
func chipList() string {
	var s []string
	for _, c := range gpioioctl.Chips {
		s = append(s, fmt.Sprintf("%s (%s)", c.Label(), c.Name()))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
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
	ref, ok := p.index[g]
	if !ok {
		return nil, fmt.Errorf("boards: %s was not opened", pinmap.Describe(g))
	}
	return &rpiPin{board: p, name: g, ref: ref}, nil
}

// Close implements Board: it releases the lines, which the kernel leaves
// at their last level, and stops reporting the inputs' changes. Closing
// again does nothing.
func (p *RaspberryPi) Close() error {
	p.closed.Store(true)
	p.mu.Lock()
	var errs []error
	for _, h := range append(p.reqs[:len(p.reqs):len(p.reqs)], p.ins...) {
		if h.req == nil {
			continue
		}
		if err := h.req.close(); err != nil {
			errs = append(errs, fmt.Errorf("boards: release the lines on %s: %w", h.chip, err))
		}
		h.req = nil
	}
	p.mu.Unlock()
	// Closing an input request ends its goroutine's read.
	p.watchers.Wait()
	return errors.Join(errs...)
}

type rpiPin struct {
	board *RaspberryPi
	name  string
	ref   lineRef
}

// request returns the pin's line request, nil if the board is closed.
// board.mu must be held.
func (r *rpiPin) request() *lineRequest { return r.board.reqs[r.ref.req].req }

func (r *rpiPin) String() string { return r.board.Model.Name + " " + pinmap.Describe(r.name) }

// Out implements actuator.Pin: SET_VALUES on the output request, for this
// line only.
func (r *rpiPin) Out(high bool) error {
	r.board.mu.Lock()
	defer r.board.mu.Unlock()
	var v uint64
	if high {
		v = r.ref.bit
	}
	err := errClosed
	if req := r.request(); req != nil {
		err = req.set(v, r.ref.bit)
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
	if req := r.request(); req != nil {
		v, err = req.get(r.ref.bit)
	}
	if err != nil {
		return false, fmt.Errorf("boards: read %s: %w", pinmap.Describe(r.name), err)
	}
	return v != 0, nil
}
