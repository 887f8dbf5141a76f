package boards

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fencegate/fencegate/boards/pinmap"
)

// The sim board's inputs live in a small JSON file next to the latch
// (InputPath), in the latch's form: {"GPIO5":"high","GPIO6": "low"}.
// Anyone sets them, from any process, with SetSimInput, which replaces the
// file (a new file renamed over it), so that a reader never sees half of
// it. A line the file has no level for is at its pull's level: high with
// PullUp, low otherwise.
//
// An open board looks at the file every simInputPoll (a stat; it reads
// the file again only when the stat differs, or every simInputReread), and
// whenever an input's Level is read; a change of a line's level counts
// once the board has seen it last for the line's Debounce.

const (
	simInputPoll   = 10 * time.Millisecond
	simInputReread = time.Second
)

// ReadSimInputs reads a sim board's input file: canonical line name →
// high. A missing file has no levels (every line at its pull's level).
func ReadSimInputs(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("boards: sim inputs: %w", err)
	}
	raw, err := parseLevels("sim inputs", path, b)
	if err != nil {
		return nil, err
	}
	m := make(map[string]bool, len(raw))
	named := make(map[string]string, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) { // the same error each time
		high := raw[name]
		key, err := simCanonical(name)
		if err != nil {
			return nil, fmt.Errorf("boards: sim inputs %s: %w", path, err)
		}
		if other, dup := named[key]; dup {
			return nil, fmt.Errorf("boards: sim inputs %s: %s and %s are the same line, %s (keep one)", path, other, name, pinmap.Describe(key))
		}
		named[key] = name
		m[key] = high
	}
	return m, nil
}

// SetSimInput sets the level of the line pin (any name of a sim board's
// line) in the input file at path (InputPath), for a sim board of this or
// another process to see. Writers in several processes take turns (a lock
// file next to it, path + ".lock"); the file is replaced in one rename.
func SetSimInput(path, pin string, high bool) error {
	key, err := simCanonical(pin)
	if err != nil {
		return err
	}
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return fmt.Errorf("boards: sim inputs: lock %s: %w", path+".lock", err)
	}
	defer unlock()
	m, err := ReadSimInputs(path)
	if err != nil {
		return fmt.Errorf("%w (fix or remove the file)", err)
	}
	m[key] = high
	text, _ := latchText(m)
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("boards: sim inputs: %w", err)
	}
	_, err = tmp.Write(text)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("boards: sim inputs: %w", err)
	}
	return nil
}

// simInputLines checks a sim board's outputs and inputs, as Open would
// open them: every name a line of the sim board, no line twice, no input
// an output.
func simInputLines(outs []Line, ins []InputLine) ([]inputLine, error) {
	outputs := map[string]string{} // canonical → as configured
	for _, l := range outs {
		key, err := simCanonical(l.Pin)
		if err != nil {
			return nil, err
		}
		if _, dup := outputs[key]; dup {
			return nil, fmt.Errorf("boards: %s is opened twice", pinmap.Describe(key))
		}
		outputs[key] = l.Pin
	}
	inputs := map[string]bool{}
	var lines []inputLine
	for i, in := range ins {
		in, err := checkInput(i, in)
		if err != nil {
			return nil, err
		}
		key, err := simCanonical(in.Pin)
		if err != nil {
			return nil, err
		}
		if out, ok := outputs[key]; ok {
			return nil, bothWays(in.Pin, out, pinmap.Describe(key))
		}
		if inputs[key] {
			return nil, fmt.Errorf("boards: %s is opened twice as an input", pinmap.Describe(key))
		}
		inputs[key] = true
		lines = append(lines, inputLine{InputLine: in, name: key, index: i})
	}
	return lines, nil
}

// inputClock is the time the sim board's inputs go by: the real one, or a
// test's.
type inputClock struct {
	now  func() time.Time
	tick <-chan time.Time // a poll of the input file
	stop func()
	// polled, if not nil, is called by the board's goroutine once it has
	// polled on a tick and delivered what the poll found.
	polled func()
}

func realInputClock() *inputClock {
	t := time.NewTicker(simInputPoll)
	return &inputClock{now: time.Now, tick: t.C, stop: t.Stop}
}

// simInputs are a sim board's opened inputs.
type simInputs struct {
	path    string
	lines   []inputLine
	byName  map[string]int // canonical name → index in lines
	onInput func(InputEvent)
	clock   *inputClock

	mu      sync.Mutex // guards the fields below
	seen    os.FileInfo
	readAt  time.Time   // when the file was last read
	fileErr error       // why the file could not be read last time
	raw     []bool      // each line's level in the file
	level   []bool      // each line's debounced level
	since   []time.Time // when raw was first seen to differ from level; zero if it does not
	queue   []InputEvent
	closed  bool

	wake     chan struct{} // a Level queued events
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// openInputs starts watching the input file at path for the lines, which
// simInputLines checked.
func (s *Sim) openInputs(path string, lines []inputLine, onInput func(InputEvent), clock *inputClock) error {
	w := &simInputs{path: path, lines: lines, byName: map[string]int{}, onInput: onInput, clock: clock,
		raw: make([]bool, len(lines)), level: make([]bool, len(lines)), since: make([]time.Time, len(lines)),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	for i, l := range lines {
		w.byName[l.name] = i
	}
	w.mu.Lock()
	w.readLocked(clock.now())
	err := w.fileErr
	copy(w.level, w.raw) // the level at open is not a change
	w.mu.Unlock()
	if err != nil {
		if clock.stop != nil {
			clock.stop()
		}
		return err
	}
	s.mu.Lock()
	s.inputs = w
	s.mu.Unlock()
	go w.run()
	return nil
}

// run polls the file on every tick and delivers the changes found, until
// close.
func (w *simInputs) run() {
	defer close(w.done)
	if w.clock.stop != nil {
		defer w.clock.stop()
	}
	for {
		ticked := false
		select {
		case <-w.stop:
			return
		case <-w.clock.tick:
			w.mu.Lock()
			w.pollLocked(w.clock.now())
			w.mu.Unlock()
			ticked = true
		case <-w.wake:
		}
		if !w.deliver() {
			return
		}
		if ticked && w.clock.polled != nil {
			w.clock.polled()
		}
	}
}

// deliver calls onInput with the queued changes, in order; false if the
// inputs were closed meanwhile.
func (w *simInputs) deliver() bool {
	for {
		w.mu.Lock()
		q := w.queue
		w.queue = nil
		w.mu.Unlock()
		if len(q) == 0 {
			return true
		}
		for _, ev := range q {
			select {
			case <-w.stop:
				return false
			default:
			}
			w.onInput(ev)
		}
	}
}

// close stops the goroutine; once it returns, onInput is not called
// again. Closing again does nothing.
func (w *simInputs) close() {
	w.stopOnce.Do(func() { close(w.stop) })
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	<-w.done
}

// pollLocked looks at the file and applies each line's debounce at now.
// w.mu must be held.
func (w *simInputs) pollLocked(now time.Time) {
	fi, err := os.Stat(w.path)
	if err != nil {
		fi = nil
	}
	if !sameStamp(fi, w.seen) || err != nil && !errors.Is(err, fs.ErrNotExist) || now.Sub(w.readAt) >= simInputReread {
		w.readLocked(now)
	}
	for i, l := range w.lines {
		if w.raw[i] == w.level[i] {
			w.since[i] = time.Time{} // a glitch shorter than the debounce
			continue
		}
		if w.since[i].IsZero() {
			w.since[i] = now
		}
		if now.Sub(w.since[i]) < l.Debounce {
			continue
		}
		w.level[i], w.since[i] = w.raw[i], time.Time{}
		if w.onInput != nil && l.Edge.reports(w.raw[i]) {
			w.queue = append(w.queue, InputEvent{Input: l.index, High: w.raw[i], At: now})
		}
	}
}

// readLocked reads the file's levels into raw; a file that cannot be read
// leaves raw as it was and sets fileErr. w.mu must be held.
func (w *simInputs) readLocked(now time.Time) {
	// The stat before the read: a file replaced in between is read again
	// at the next poll.
	fi, err := os.Stat(w.path)
	if err != nil {
		fi = nil
	}
	w.seen, w.readAt = fi, now
	m, err := ReadSimInputs(w.path)
	if w.fileErr = err; err != nil {
		return
	}
	for i, l := range w.lines {
		high, ok := m[l.name]
		if !ok {
			high = l.Pull == PullUp
		}
		w.raw[i] = high
	}
}

// sameStamp says whether two stats of the input file are of the same,
// unchanged file (or both of no file).
func sameStamp(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// Input implements Board.
func (s *Sim) Input(name string) (Input, error) {
	key, err := simCanonical(name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	w := s.inputs
	s.mu.Unlock()
	if w != nil {
		if i, ok := w.byName[key]; ok {
			return &simInput{w: w, i: i}, nil
		}
	}
	return nil, fmt.Errorf("boards: sim board: %s is not an opened input", pinmap.Describe(key))
}

// simInput is an opened input of the sim board.
type simInput struct {
	w *simInputs
	i int
}

func (in *simInput) String() string { return "sim input " + pinmap.Describe(in.w.lines[in.i].name) }

// Level implements Input: it looks at the file first, so that a level
// set (without debounce) before the call is the level it returns.
func (in *simInput) Level() (bool, error) {
	w := in.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false, fmt.Errorf("boards: read %s: %w", in, errClosed)
	}
	w.pollLocked(w.clock.now())
	if len(w.queue) > 0 {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	if w.fileErr != nil {
		return false, fmt.Errorf("boards: read %s: %w", in, w.fileErr)
	}
	return w.level[in.i], nil
}
