// Package boards opens the boards fencegate drives: the simulated board of
// the simulator and the tests, and the Raspberry Pi's GPIO through the
// kernel's character device. It decides which board a configuration
// means ([Open]) and owns the rules every board shares: the pin names
// (package pinmap, which needs nothing but the standard library) and where
// the sim board keeps its levels ([LatchPath]).
//
// Every board hands out its outputs as [actuator.Pin]: the one pin
// interface, defined by the package that drives outputs.
package boards

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards/pinmap"
)

// ErrBoard is wrapped by the errors of Open and Check that say the
// configured board is not this machine, or not as configured: an unknown
// board name, another Raspberry Pi model, no GPIO chip or line where the
// model has them. A restart cannot change that.
var ErrBoard = errors.New("boards: the configured board is not here")

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
	// Close releases the board's lines. A real board leaves them at their
	// last level, as the kernel does.
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

// Options configure Open.
type Options struct {
	// Board is the configuration's board name (pinmap.Boards).
	Board string
	// Store is the fence store's file; the sim board keeps its latch next
	// to it (LatchPath).
	Store string
	// Lines are the outputs to open, at their initial levels.
	Lines []Line
}

// Open opens the board a configuration names, with the given lines at
// their initial levels.
func Open(o Options) (Board, error) {
	switch {
	case o.Board == pinmap.Sim:
		s, err := OpenSim(LatchPath(o.Store))
		if err != nil {
			return nil, err
		}
		if err := s.SetLevels(o.Lines); err != nil {
			return nil, err
		}
		return s, nil
	case pinmap.IsRaspberryPi(o.Board):
		model, err := pinmap.ResolveModel(o.Board)
		if err != nil {
			return nil, notHere(err)
		}
		return OpenRaspberryPi(model, o.Lines)
	}
	return nil, notHere(fmt.Errorf("boards: unknown board %q (want one of %s)", o.Board, strings.Join(pinmap.Boards(), ", ")))
}

// LatchPath returns the sim board's latch file for a fence store: next to
// it, named after it, so that the levels stay with the record they follow.
func LatchPath(store string) string { return store + ".pins" }

// Both boards and their pins, checked against the interfaces on every
// platform this package builds for: the Raspberry Pi's stub on macOS and
// Windows must keep up with the real thing.
var (
	_ Board        = (*Sim)(nil)
	_ Board        = (*RaspberryPi)(nil)
	_ actuator.Pin = (*simPin)(nil)
	_ actuator.Pin = (*rpiPin)(nil)
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
		r := Report{Board: "sim board, latch " + path}
		seen := map[string]bool{}
		for i, l := range o.Lines {
			key, err := simCanonical(l.Pin)
			if err != nil {
				return Report{}, err
			}
			if seen[key] {
				return Report{}, fmt.Errorf("boards: %s is opened twice", pinmap.Describe(key))
			}
			seen[key] = true
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
		return checkRaspberryPi(model, o.Lines)
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
