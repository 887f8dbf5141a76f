// Package boards opens the boards fencegate drives: the simulated board of
// the simulator and the tests, and the Raspberry Pi's GPIO through the
// kernel's character device. It decides which board a configuration
// means ([Open]) and owns the rules every board shares: the pin names
// (package pinmap, which needs nothing but the standard library) and where
// the sim board keeps its levels ([LatchPath], [InputPath]).
//
// Every board hands out its outputs as [actuator.Pin]: the one pin
// interface, defined by the package that drives outputs. Its inputs
// ([Options.Inputs]) are [Input]s, and their changes, debounced, reach
// [Options.OnInput].
package boards

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards/pinmap"
)

// ErrBoard is wrapped by the errors of Open and Check that say the
// configured board is not this machine, or not as configured: an unknown
// board name, another Raspberry Pi model, no GPIO chip or line where the
// model has them. A restart cannot change that.
var ErrBoard = errors.New("boards: the configured board is not here")

// errClosed is what a pin or an input of a closed board says.
var errClosed = errors.New("the board is closed")

// boardError keeps an error's message and makes it match ErrBoard.
type boardError struct{ error }

func (e boardError) Is(target error) bool { return target == ErrBoard }
func (e boardError) Unwrap() error        { return e.error }

// notHere marks err (if any) as ErrBoard.
func notHere(err error) error {
	if err == nil {
		return nil
	}
	return boardError{err}
}

// Board is an opened board.
type Board interface {
	// Pin returns an opened output by any name pinmap.Canonical accepts.
	Pin(name string) (actuator.Pin, error)
	// Input returns an opened input (one of Options.Inputs) by any name
	// pinmap.Canonical accepts.
	Input(name string) (Input, error)
	// Close releases the board's lines. A real board leaves its outputs at
	// their last level, as the kernel does. It stops the inputs: once it
	// has returned, Options.OnInput is not called again (so OnInput must
	// not call Close, which waits for it).
	Close() error
	// String describes the board for people: its model, chip or latch.
	String() string
}

// Line is one output to open.
type Line struct {
	// Pin is any name pinmap.Canonical accepts.
	Pin string
	// InitialHigh is the level the line is at from the moment it is
	// opened. Package actuator decides it (the boot rule), so that taking
	// over a line moves nothing that reconciliation would not move.
	InitialHigh bool
	// ActiveLow says the output is on at low; Check warns about a chip
	// whose lines energise it before the gateway starts.
	ActiveLow bool
}

// Pull is an input line's bias: the resistor that holds it at a level
// while nothing drives it.
type Pull string

// The pulls an input may have.
const (
	PullNone Pull = "none" // no resistor: the line floats unless driven
	PullUp   Pull = "up"
	PullDown Pull = "down"
)

// Edge says which changes of an input are reported.
type Edge string

// The edges an input may report.
const (
	EdgeBoth    Edge = "both"
	EdgeRising  Edge = "rising"  // low to high
	EdgeFalling Edge = "falling" // high to low
)

// InputLine is one input to open.
type InputLine struct {
	// Pin is any name pinmap.Canonical accepts (header pin or chip line).
	Pin string
	// Pull is the line's bias; "" means PullNone.
	Pull Pull
	// Debounce is how long a new level must last before it counts: a
	// shorter pulse is never reported, and Level keeps the old level
	// meanwhile. 0 means none. On the Raspberry Pi it is the kernel's
	// (GPIO_V2_LINE_ATTR_ID_DEBOUNCE, in whole microseconds).
	Debounce time.Duration
	// Edge says which changes reach OnInput; "" means EdgeBoth. Level
	// follows every change whatever Edge says.
	Edge Edge
}

// InputEvent is a reported change of an input's (debounced) level.
type InputEvent struct {
	Input int  // index in Options.Inputs
	High  bool // the new level
	// At is when the board saw the change: on the Raspberry Pi the
	// kernel's timestamp (of the edge, or of the end of the debounce
	// period), converted to a time.Time that carries a monotonic reading.
	At time.Time
}

// Input is an opened input line.
type Input interface {
	// Level returns the input's debounced level now.
	Level() (high bool, err error)
}

// Options configure Open.
type Options struct {
	// Board is the configuration's board name (pinmap.Boards).
	Board string
	// Store is the fence store's file; the sim board keeps its latch
	// (LatchPath) and its inputs (InputPath) next to it.
	Store string
	// Lines are the outputs to open, at their initial levels.
	Lines []Line
	// Inputs are the inputs to open. A line is an input or an output,
	// never both.
	Inputs []InputLine
	// OnInput, if not nil, is called for every reported change of an
	// input (InputLine.Edge), in order for each input, never for the level
	// an input has when it is opened (read that with Level). It is called
	// from a goroutine of the board, never concurrently with itself, and
	// must not block long: the board's inputs wait for it.
	OnInput func(InputEvent)
}

// Opening is a board whose inputs are open and whose outputs are not taken
// over yet (OpenInputs): the inputs can be read before any output line
// moves, so that a trip input decides the level at which its scope's
// outputs are taken over.
type Opening interface {
	// Input returns an opened input, as Board.Input does.
	Input(name string) (Input, error)
	// TakeOver takes over the outputs, each at its initial level: lines
	// are Options.Lines, the same pins in the same order, with the levels
	// decided once the inputs were read. It returns the whole board; on an
	// error it closes it.
	TakeOver(lines []Line) (Board, error)
	// Close releases the inputs, and the outputs if they were taken over.
	Close() error
}

// Open opens the board a configuration names, with the given lines at
// their initial levels: OpenInputs, then TakeOver.
func Open(o Options) (Board, error) {
	op, err := OpenInputs(o)
	if err != nil {
		return nil, err
	}
	return op.TakeOver(o.Lines)
}

// OpenInputs opens the board a configuration names: it finds every line,
// output or input, and opens the inputs, whose changes go to o.OnInput
// from now on; but it takes over no output (o.Lines' levels are not
// used): Opening.TakeOver does.
func OpenInputs(o Options) (Opening, error) {
	switch {
	case o.Board == pinmap.Sim:
		s, err := openSim(o)
		if err != nil {
			return nil, err
		}
		return s, nil
	case pinmap.IsRaspberryPi(o.Board):
		model, err := pinmap.ResolveModel(o.Board)
		if err != nil {
			return nil, notHere(err)
		}
		p, err := openRaspberryPi(model, o)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
	return nil, notHere(fmt.Errorf("boards: unknown board %q (want one of %s)", o.Board, strings.Join(pinmap.Boards(), ", ")))
}

// sameLines checks that lines, to be taken over, are the outputs opened:
// the same pins, in the same order.
func sameLines(opened, lines []Line) error {
	if len(lines) != len(opened) {
		return fmt.Errorf("boards: %d output lines to take over, but the board was opened with %d", len(lines), len(opened))
	}
	for i := range lines {
		if lines[i].Pin != opened[i].Pin {
			return fmt.Errorf("boards: output line %d to take over is %s, but the board was opened with %s there", i, lines[i].Pin, opened[i].Pin)
		}
	}
	return nil
}

// LatchPath returns the sim board's latch file for a fence store: next to
// it, named after it, so that the levels stay with the record they follow.
func LatchPath(store string) string { return store + ".pins" }

// InputPath returns the sim board's input file for a fence store, next to
// its latch: {"GPIO5":"high"}. SetSimInput writes it; a line it has no
// level for is at its pull's level.
func InputPath(store string) string { return store + ".inputs" }

// inputLine is an InputLine checked, with its defaults filled in.
type inputLine struct {
	InputLine
	name  string // canonical
	index int    // in Options.Inputs
}

// checkInput checks an input's settings (not its pin) and fills in the
// defaults.
func checkInput(i int, in InputLine) (InputLine, error) {
	switch in.Pull {
	case "":
		in.Pull = PullNone
	case PullNone, PullUp, PullDown:
	default:
		return in, fmt.Errorf("boards: input %d (%s): pull %q (want %s, %s or %s)", i, in.Pin, in.Pull, PullNone, PullUp, PullDown)
	}
	switch in.Edge {
	case "":
		in.Edge = EdgeBoth
	case EdgeBoth, EdgeRising, EdgeFalling:
	default:
		return in, fmt.Errorf("boards: input %d (%s): edge %q (want %s, %s or %s)", i, in.Pin, in.Edge, EdgeBoth, EdgeRising, EdgeFalling)
	}
	if in.Debounce < 0 || in.Debounce > maxDebounce {
		return in, fmt.Errorf("boards: input %d (%s): debounce %v (want 0, none, to %v)", i, in.Pin, in.Debounce, maxDebounce)
	}
	return in, nil
}

// maxDebounce is the longest debounce period the kernel takes: a 32-bit
// count of microseconds.
const maxDebounce = math.MaxUint32 * time.Microsecond

// reports says whether a change to high (or low) is reported for an input
// with this edge.
func (e Edge) reports(high bool) bool {
	return e == EdgeBoth || (e == EdgeRising) == high
}

// bothWays is the error for a line opened as an input and an output: both
// as configured, and which line they are.
func bothWays(input, output, line string) error {
	return fmt.Errorf("boards: input %s and output %s are the same line, %s: a line is an input or an output, not both", input, output, line)
}

// Both boards and their pins, checked against the interfaces on every
// platform this package builds for: the Raspberry Pi's stub on macOS and
// Windows must keep up with the real thing.
var (
	_ Board        = (*Sim)(nil)
	_ Board        = (*RaspberryPi)(nil)
	_ Opening      = (*Sim)(nil)
	_ Opening      = (*RaspberryPi)(nil)
	_ actuator.Pin = (*simPin)(nil)
	_ actuator.Pin = (*rpiPin)(nil)
	_ Input        = (*simInput)(nil)
	_ Input        = (*rpiInput)(nil)
)

// Report is what Check found.
type Report struct {
	// Board describes the board for people.
	Board string
	// Warnings are about lines Open would take, but that may not do what
	// their outputs want before the gateway starts.
	Warnings []Warning
}

// Warning is about one of Options.Lines.
type Warning struct {
	Line int // index in Options.Lines
	Text string
}

// Check tells whether Open would succeed with these options, without
// taking any line over: the sim board's latch can be read and has the
// lines, or this machine is the configured Raspberry Pi and its GPIO
// chips have the lines. It warns about lines of chips whose power-on
// level energises their outputs until the gateway starts
// (pinmap.PowerOnWarning).
func Check(o Options) (Report, error) {
	switch {
	case o.Board == pinmap.Sim:
		path := LatchPath(o.Store)
		if _, err := ReadLatch(path); err != nil {
			return Report{}, err
		}
		if _, err := simInputLines(o.Lines, o.Inputs); err != nil {
			return Report{}, err
		}
		if len(o.Inputs) > 0 {
			if _, err := ReadSimInputs(InputPath(o.Store)); err != nil {
				return Report{}, err
			}
		}
		r := Report{Board: "sim board, latch " + path}
		if len(o.Inputs) > 0 {
			r.Board += ", inputs " + InputPath(o.Store)
		}
		for i, l := range o.Lines {
			key, _ := simCanonical(l.Pin) // simInputLines checked it
			if c, _, err := simLine(key); err == nil {
				r.warn(i, c.Family(), l.ActiveLow)
			}
		}
		return r, nil
	case pinmap.IsRaspberryPi(o.Board):
		model, err := pinmap.ResolveModel(o.Board)
		if err != nil {
			return Report{}, notHere(err)
		}
		return checkRaspberryPi(model, o)
	}
	return Report{}, notHere(fmt.Errorf("boards: unknown board %q (want one of %s)", o.Board, strings.Join(pinmap.Boards(), ", ")))
}

// warn adds the power-on warning, if any, for line i on a chip of this
// family.
func (r *Report) warn(i int, family string, activeLow bool) {
	if w := pinmap.PowerOnWarning(family, activeLow); w != "" {
		r.Warnings = append(r.Warnings, Warning{Line: i, Text: w})
	}
}
