package boards

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards/pinmap"
)

// Sim is the simulated board. Its output levels live in a small JSON file
// (the latch), so they outlive the gateway process as a real output does,
// and anyone can read them: {"GPIO17":"high","GPIO27":"low"}.
//
// The latch is rewritten atomically (temporary file and rename) on every
// change, so a reader never sees a torn file. It is not fsynced: it models
// a process crash, not a power cut.
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
}

// OpenSim opens (or creates) the latch file at path.
func OpenSim(path string) (*Sim, error) {
	s := &Sim{path: path, faults: make(map[string]error), drives: make(map[string]uint64)}
	if _, err := ReadLatch(path); err != nil {
		return nil, err
	}
	return s, nil
}

// Path returns the latch file's name.
func (s *Sim) Path() string { return s.path }

// String implements Board.
func (s *Sim) String() string { return "sim board, latch " + s.path }

// Close implements Board; the latch file stays.
func (s *Sim) Close() error { return nil }

// Pin returns the output named name (any form pinmap.Canonical accepts).
func (s *Sim) Pin(name string) (actuator.Pin, error) {
	g, err := pinmap.Canonical(name)
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
		g, err := pinmap.Canonical(l.Pin)
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
	g, cerr := pinmap.Canonical(name)
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
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("boards: sim latch: %w", err)
	}
	var raw map[string]string
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("boards: sim latch %s: %w", path, err)
	}
	m := make(map[string]bool, len(raw))
	for k, v := range raw {
		switch v {
		case "high":
			m[k] = true
		case "low":
			m[k] = false
		default:
			return nil, fmt.Errorf("boards: sim latch %s: pin %s has level %q (want high or low)", path, k, v)
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

// writeLocked sets levels in the latch file (atomically: a temporary file
// renamed over it). s.mu must be held.
func (s *Sim) writeLocked(levels map[string]bool) error {
	cur, err := s.readLocked()
	if err != nil {
		return err
	}
	m := make(map[string]bool, len(cur)+len(levels))
	for pin, high := range cur {
		m[pin] = high
	}
	for pin, high := range levels {
		m[pin] = high
	}
	raw := make(map[string]string, len(m))
	for k, v := range m {
		raw[k] = "low"
		if v {
			raw[k] = "high"
		}
	}
	b, err := json.Marshal(raw) // encoding/json sorts map keys
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("boards: sim latch: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("boards: sim latch: %w", err)
	}
	fi, err := tmp.Stat()
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("boards: sim latch: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("boards: sim latch: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		os.Remove(tmp.Name())
		s.wrote = nil
		return fmt.Errorf("boards: sim latch: %w", err)
	}
	s.levels, s.wrote = m, fi
	return nil
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
