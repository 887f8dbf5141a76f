package boards

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards/pinmap"
)

// Sim is the simulated board. Its output levels live in a small JSON file
// (the latch), so they outlive the gateway process as a real output does,
// and anyone can read them (with ReadLatch): {"GPIO17":"high","GPIO27": "low"}.
//
// A drive rewrites the latch in place, in one write, and a new pin
// replaces it with a rename (see writeLocked): a process killed at any
// point leaves it whole. It is not fsynced: it models a process crash, not
// a power cut.
type Sim struct {
	path string

	mu     sync.Mutex // guards the fields below, and serialises latch writes
	faults map[string]error
	drives map[string]uint64
	// levels are the latch's levels as this board last wrote them to the
	// file wrote: while the file at path is still that one, unchanged,
	// they are read from here and not from the file.
	levels map[string]bool
	wrote  os.FileInfo
	file   *os.File // the latch file this board wrote last, open for writing in place
	// at is where each pin's level lies in that file's text.
	at map[string]int64
	// inputs are the opened inputs (siminputs.go); nil if none.
	inputs *simInputs
	// opened are the outputs OpenInputs was given, for TakeOver.
	opened []Line
}

// OpenSim opens (or creates) the latch file at path.
func OpenSim(path string) (*Sim, error) {
	s := &Sim{path: path, faults: make(map[string]error), drives: make(map[string]uint64)}
	if _, err := ReadLatch(path); err != nil {
		return nil, err
	}
	return s, nil
}

// openSim opens the sim board's latch and inputs (OpenInputs).
func openSim(o Options) (*Sim, error) {
	ins, err := simInputLines(o.Lines, o.Inputs)
	if err != nil {
		return nil, err
	}
	if len(ins) > 0 {
		if _, err := ReadSimInputs(InputPath(o.Store)); err != nil {
			return nil, err
		}
	}
	s, err := OpenSim(LatchPath(o.Store))
	if err != nil {
		return nil, err
	}
	s.opened = o.Lines
	if len(ins) > 0 {
		if err := s.openInputs(InputPath(o.Store), ins, o.OnInput, realInputClock()); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// TakeOver implements Opening: it sets the outputs' levels in one write
// of the latch (SetLevels).
func (s *Sim) TakeOver(lines []Line) (Board, error) {
	err := sameLines(s.opened, lines)
	if err == nil {
		err = s.SetLevels(lines)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Path returns the latch file's name.
func (s *Sim) Path() string { return s.path }

// String implements Board.
func (s *Sim) String() string { return "sim board, latch " + s.path }

// Close implements Board: it stops the inputs; the latch and input files
// stay.
func (s *Sim) Close() error {
	s.mu.Lock()
	if s.file != nil {
		s.file.Close()
		s.file, s.wrote = nil, nil
	}
	w := s.inputs
	s.mu.Unlock()
	if w != nil {
		w.close()
	}
	return nil
}

// Pin returns the output named name (any form pinmap.Canonical accepts).
func (s *Sim) Pin(name string) (actuator.Pin, error) {
	g, err := simCanonical(name)
	if err != nil {
		return nil, err
	}
	return &simPin{board: s, name: g}, nil
}

// SetLevels sets the levels of lines in one write of the latch, as a real
// board's line request does; they do not count as drives.
func (s *Sim) SetLevels(lines []Line) error {
	if len(lines) == 0 {
		return nil
	}
	levels := make(map[string]bool, len(lines))
	for _, l := range lines {
		g, err := simCanonical(l.Pin)
		if err != nil {
			return err
		}
		levels[g] = l.InitialHigh
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeLocked(levels)
}

// SetFault makes every drive of the named pin fail with err (nil clears it).
// It is the simulator's fault injection.
func (s *Sim) SetFault(name string, err error) error {
	g, cerr := simCanonical(name)
	if cerr != nil {
		return cerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.faults, g)
	} else {
		s.faults[g] = err
	}
	return nil
}

// ReadLatch reads a sim latch file: canonical pin name → high. A missing
// file is an empty latch (every line low).
func ReadLatch(path string) (map[string]bool, error) {
	var m map[string]bool
	var err error
	// A latch read while the gateway writes it in place can be a mix of
	// two texts, which never parses (see Sim): read it again.
	for range 100 {
		var torn bool
		if m, torn, err = readLatch(path); !torn {
			return m, err
		}
		time.Sleep(time.Millisecond)
	}
	return m, err
}

// readLatch reads the latch once; torn says its text did not parse.
func readLatch(path string) (_ map[string]bool, torn bool, _ error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("boards: sim latch: %w", err)
	}
	m, err := parseLevels("sim latch", path, b)
	return m, err != nil, err
}

// parseLevels parses the text of a latch or an input file: pin → "high"
// or "low". what and path are for the error.
func parseLevels(what, path string, b []byte) (map[string]bool, error) {
	var raw map[string]string
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("boards: %s %s: %w", what, path, err)
	}
	m := make(map[string]bool, len(raw))
	for k, v := range raw {
		switch v {
		case "high":
			m[k] = true
		case "low":
			m[k] = false
		default:
			return nil, fmt.Errorf("boards: %s %s: pin %s has level %q (want high or low)", what, path, k, v)
		}
	}
	return m, nil
}

func (s *Sim) write(pin string, high bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.faults[pin]; err != nil {
		return err
	}
	if err := s.writeLocked(map[string]bool{pin: high}); err != nil {
		return err
	}
	s.drives[pin]++
	return nil
}

// writeLocked sets levels in the latch file. s.mu must be held.
//
// A level of a pin the file already has is written in place: every level
// takes the same room (`"GPIO17":"high"` and `"GPIO17": "low"`), so one
// write of a single pin's level where it lies (or, for several pins, of
// the whole text over the old one) changes only those bytes, and a
// process killed after it leaves the file whole. A reader that reads while
// it is written may see the old bytes of some pins and the new of others:
// ReadLatch reads again until the text parses, and any mix of one pin's old
// and new bytes does not. A new pin, or a file this board did not write
// last, is written as a new file renamed over the old one.
func (s *Sim) writeLocked(levels map[string]bool) error {
	cur, err := s.readLocked()
	if err != nil {
		return err
	}
	if len(levels) == 1 && s.file != nil {
		// One pin of the file this board wrote last (readLocked keeps it
		// open only while it is unchanged): write its level alone.
		for pin, high := range levels {
			if at, ok := s.at[pin]; ok {
				return s.writeLevel(pin, high, at)
			}
		}
	}
	m := make(map[string]bool, len(cur)+len(levels))
	for pin, high := range cur {
		m[pin] = high
	}
	samePins := s.file != nil
	for pin, high := range levels {
		if _, ok := m[pin]; !ok {
			samePins = false
		}
		m[pin] = high
	}
	text, at := latchText(m)
	if samePins && int64(len(text)) == s.wrote.Size() {
		if _, err := s.file.WriteAt(text, 0); err != nil {
			return fmt.Errorf("boards: sim latch: %w", err)
		}
		fi, err := s.file.Stat()
		if err != nil {
			return fmt.Errorf("boards: sim latch: %w", err)
		}
		s.levels, s.wrote, s.at = m, fi, at
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("boards: sim latch: %w", err)
	}
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("boards: sim latch: %w", err)
	}
	if _, err := tmp.Write(text); err != nil {
		return fail(err)
	}
	fi, err := tmp.Stat()
	if err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fail(err)
	}
	if s.file != nil {
		s.file.Close()
	}
	s.file, s.levels, s.wrote, s.at = tmp, m, fi, at // tmp is the latch now
	return nil
}

// writeLevel writes pin's level, at offset at of the latch file this board
// wrote last, in place. s.mu must be held.
func (s *Sim) writeLevel(pin string, high bool, at int64) error {
	if _, err := s.file.WriteAt(levelText(high), at); err != nil {
		return fmt.Errorf("boards: sim latch: %w", err)
	}
	fi, err := s.file.Stat()
	if err != nil {
		return fmt.Errorf("boards: sim latch: %w", err)
	}
	s.levels[pin], s.wrote = high, fi
	return nil
}

// levelText is a level as the latch holds it after its pin's name; both
// take the same room.
func levelText(high bool) []byte {
	if high {
		return []byte(`:"high"`)
	}
	return []byte(`: "low"`)
}

// latchText formats levels as the latch file's JSON object, pins sorted,
// each level in the same room, and says where each pin's level lies.
func latchText(levels map[string]bool) ([]byte, map[string]int64) {
	pins := make([]string, 0, len(levels))
	for pin := range levels {
		pins = append(pins, pin)
	}
	sort.Strings(pins)
	b := []byte{'{'}
	at := make(map[string]int64, len(pins))
	for i, pin := range pins {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, pin)
		at[pin] = int64(len(b))
		b = append(b, levelText(levels[pin])...)
	}
	return append(b, '}', '\n'), at
}

// readLocked returns the latch's levels: this board's own, while the file
// is the one it last wrote, unchanged (one stat); else the file's. s.mu
// must be held. Do not change the map it returns.
func (s *Sim) readLocked() (map[string]bool, error) {
	if s.wrote != nil {
		fi, err := os.Stat(s.path)
		if err == nil && os.SameFile(fi, s.wrote) && fi.Size() == s.wrote.Size() && fi.ModTime().Equal(s.wrote.ModTime()) {
			return s.levels, nil
		}
	}
	if s.file != nil {
		s.file.Close()
		s.file, s.wrote = nil, nil
	}
	return ReadLatch(s.path)
}

type simPin struct {
	board *Sim
	name  string
}

func (p *simPin) String() string { return "sim " + pinmap.Describe(p.name) }

// Out implements actuator.Pin.
func (p *simPin) Out(high bool) error { return p.board.write(p.name, high) }

// Drives returns how often this process drove the pin, so that a test or
// a scenario can see that a redelivered command was not driven twice.
func (p *simPin) Drives() uint64 {
	p.board.mu.Lock()
	defer p.board.mu.Unlock()
	return p.board.drives[p.name]
}

// Level implements actuator.Pin: it reads the latch file (or what this
// board last wrote to it, while it is unchanged).
func (p *simPin) Level() (bool, error) {
	p.board.mu.Lock()
	defer p.board.mu.Unlock()
	m, err := p.board.readLocked()
	if err != nil {
		return false, err
	}
	return m[p.name], nil
}
