package boards

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// The input file: SetSimInput keeps every line under its canonical name,
// in the latch's form, replaced whole; ReadSimInputs reads it back, and
// names a hand-written file's aliases canonically.
func TestSimInputFile(t *testing.T) {
	dir := t.TempDir()
	path := InputPath(filepath.Join(dir, "fence.db"))
	if want := filepath.Join(dir, "fence.db.inputs"); path != want {
		t.Fatalf("InputPath = %q, want %q", path, want)
	}
	if m, err := ReadSimInputs(path); err != nil || len(m) != 0 {
		t.Errorf("ReadSimInputs(no file) = %v, %v; want empty, nil", m, err)
	}
	for _, set := range []struct {
		pin  string
		high bool
	}{{"PIN29", true}, {"bcm6", false}, {"mcp23017@21:GPB0", true}, {"GPIO5", false}} {
		if err := SetSimInput(path, set.pin, set.high); err != nil {
			t.Fatalf("SetSimInput(%s, %v): %v", set.pin, set.high, err)
		}
	}
	want := map[string]bool{"GPIO5": false, "GPIO6": false, "mcp23017@21:8": true}
	if m, err := ReadSimInputs(path); err != nil || !reflect.DeepEqual(m, want) {
		t.Errorf("ReadSimInputs = %v, %v; want %v", m, err, want)
	}
	b, _ := os.ReadFile(path)
	if got, w := string(b), `{"GPIO5": "low","GPIO6": "low","mcp23017@21:8":"high"}`+"\n"; got != w {
		t.Errorf("input file = %q, want %q", got, w)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if w := []string{"fence.db.inputs", "fence.db.inputs.lock"}; !reflect.DeepEqual(names, w) {
		t.Errorf("directory holds %v, want %v (no temporary file left)", names, w)
	}

	for _, bad := range []struct{ pin, frag string }{
		{"PIN6", "ground"}, {"GPIO40", "not on the 40-pin header"}, {"mcp23017@29:0", "no GPIO chip mcp23017@29"}, {"pcf8574@27:8", "has no line 8"},
	} {
		if err := SetSimInput(path, bad.pin, true); err == nil || !strings.Contains(err.Error(), bad.frag) {
			t.Errorf("SetSimInput(%s) = %v, want an error saying %q", bad.pin, err, bad.frag)
		}
	}
	if b2, _ := os.ReadFile(path); string(b2) != string(b) {
		t.Errorf("refused SetSimInputs changed the file to %q", b2)
	}

	// A hand-written file may use any name, once per line.
	for _, c := range []struct {
		text string
		want map[string]bool
		frag string
	}{
		{`{"pin29":"high","gpiochip5:P1":"low"}`, map[string]bool{"GPIO5": true, "pcf8574@27:1": false}, ""},
		{`{"PIN29":"high","GPIO5":"low"}`, nil, "GPIO5 and PIN29 are the same line, GPIO5 (header pin 29) (keep one)"},
		{`{"GPIO5":"on"}`, nil, `pin GPIO5 has level "on" (want high or low)`},
		{`{"GPIO99":"high"}`, nil, "GPIO99 is not on the 40-pin header"},
		{`not json`, nil, "sim inputs " + path},
	} {
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := ReadSimInputs(path)
		if c.frag == "" {
			if err != nil || !reflect.DeepEqual(m, c.want) {
				t.Errorf("ReadSimInputs(%s) = %v, %v; want %v", c.text, m, err, c.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.frag) || !strings.Contains(err.Error(), path) {
			t.Errorf("ReadSimInputs(%s) = %v, %v; want an error naming %s and saying %q", c.text, m, err, path, c.frag)
		}
		// SetSimInput does not write over a file it cannot read.
		if err := SetSimInput(path, "GPIO17", true); err == nil || !strings.Contains(err.Error(), "fix or remove the file") {
			t.Errorf("SetSimInput over %s = %v; want refused", c.text, err)
		}
		if b, _ := os.ReadFile(path); string(b) != c.text {
			t.Errorf("SetSimInput changed a bad file %q to %q", c.text, b)
		}
	}
}

// Writers in several processes take turns: none loses another's level.
// Each child process (this test binary again) sets its own line 200
// times, ending high, and sees the level it set last in the file each
// time; every line must end high.
func TestSimInputWritersTakeTurns(t *testing.T) {
	if path := os.Getenv("FENCEGATE_SET_SIM_INPUT"); path != "" {
		pin := os.Getenv("FENCEGATE_SET_SIM_PIN")
		for { // all start together, once the parent says go
			if _, err := os.Stat(path + ".go"); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		for i := range 200 {
			if err := SetSimInput(path, pin, i%2 == 1); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			// Nobody else sets this line: it keeps the level set last.
			if m, err := ReadSimInputs(path); err != nil || m[pin] != (i%2 == 1) {
				fmt.Fprintf(os.Stderr, "set %s %v (write %d), then the file had %v, %v: another writer lost it\n", pin, i%2 == 1, i+1, m, err)
				os.Exit(1)
			}
		}
		os.Exit(0)
	}
	path := InputPath(filepath.Join(t.TempDir(), "fence.db"))
	pins := []string{"GPIO4", "GPIO5", "GPIO6", "GPIO12", "GPIO13", "GPIO16"}
	var wg sync.WaitGroup
	for _, pin := range pins {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSimInputWritersTakeTurns$")
		cmd.Env = append(os.Environ(), "FENCEGATE_SET_SIM_INPUT="+path, "FENCEGATE_SET_SIM_PIN="+pin)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := cmd.Wait(); err != nil {
				t.Errorf("child setting %s: %v\n%s", pin, err, out.String())
			}
		})
	}
	if err := os.WriteFile(path+".go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	m, err := ReadSimInputs(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, pin := range pins {
		if high, ok := m[pin]; !ok || !high {
			t.Errorf("%s: %v (in the file: %v); want high, its writer's last level (the file: %v)", pin, high, ok, m)
		}
	}
}

// simInputEvents collects a board's input events.
type simInputEvents struct {
	mu  sync.Mutex
	got []InputEvent
	c   chan InputEvent
}

func newSimInputEvents() *simInputEvents { return &simInputEvents{c: make(chan InputEvent, 100)} }

func (e *simInputEvents) on(ev InputEvent) {
	e.mu.Lock()
	e.got = append(e.got, ev)
	e.mu.Unlock()
	e.c <- ev
}

func (e *simInputEvents) all() []InputEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]InputEvent(nil), e.got...)
}

// next waits for the next event.
func (e *simInputEvents) next(t *testing.T) InputEvent {
	t.Helper()
	select {
	case ev := <-e.c:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatalf("no input event within 5 s (events so far: %+v)", e.all())
	}
	return InputEvent{}
}

func mustInputLevel(t *testing.T, b Board, name string) bool {
	t.Helper()
	in, err := b.Input(name)
	if err != nil {
		t.Fatal(err)
	}
	high, err := in.Level()
	if err != nil {
		t.Fatalf("%s Level: %v", name, err)
	}
	return high
}

// The sim board's inputs through Open, in real time: each at its pull's
// level until the file has one; a change set from the outside is Level at
// once (without debounce) and reaches OnInput; an edge an input does not
// report changes its Level only.
func TestSimInputs(t *testing.T) {
	store := filepath.Join(t.TempDir(), "fence.db")
	path := InputPath(store)
	if err := SetSimInput(path, "GPIO13", true); err != nil { // before the open
		t.Fatal(err)
	}
	ev := newSimInputEvents()
	b, err := Open(Options{Board: "sim", Store: store, Lines: []Line{{Pin: "GPIO17"}},
		Inputs: []InputLine{
			{Pin: "PIN29", Pull: PullUp},
			{Pin: "GPIO6", Pull: PullDown},
			{Pin: "GPIO19"},
			{Pin: "mcp23017@21:GPB0", Pull: PullUp, Edge: EdgeFalling},
			{Pin: "GPIO13"},
			{Pin: "GPIO26", Edge: EdgeRising},
		},
		OnInput: ev.on})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for name, want := range map[string]bool{"GPIO5": true, "PIN31": false, "GPIO19": false, "gpiochip2:8": true, "GPIO13": true, "GPIO26": false} {
		if got := mustInputLevel(t, b, name); got != want {
			t.Errorf("%s at open: Level %v, want %v (its pull's, or the file's)", name, got, want)
		}
	}
	if _, err := b.Input("GPIO17"); err == nil || !strings.Contains(err.Error(), "GPIO17 (header pin 11) is not an opened input") {
		t.Errorf("Input(GPIO17), an output: %v", err)
	}
	if _, err := b.Pin("GPIO17"); err != nil {
		t.Errorf("Pin(GPIO17): %v", err)
	}

	set := func(pin string, high bool) {
		t.Helper()
		if err := SetSimInput(path, pin, high); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	set("GPIO6", true)
	if !mustInputLevel(t, b, "GPIO6") {
		t.Error("GPIO6 Level after SetSimInput high: low")
	}
	if got := ev.next(t); got.Input != 1 || !got.High || got.At.Before(start) || time.Since(got.At) < 0 {
		t.Errorf("event %+v, want input 1 high, at a time since the set", got)
	}
	set("GPIO5", false)
	if got := ev.next(t); got.Input != 0 || got.High {
		t.Errorf("event %+v, want input 0 low", got)
	}
	// The falling-edge input: its rise changes Level only. Level reads the
	// file, so the rise is taken before the marker (GPIO19) is set, and its
	// event, if it had one, would come before the marker's.
	set("mcp23017@21:8", false)
	if got := ev.next(t); got.Input != 3 || got.High {
		t.Errorf("event %+v, want input 3 low (falling)", got)
	}
	set("mcp23017@21:GPB0", true)
	if !mustInputLevel(t, b, "mcp23017@21:GPB0") {
		t.Error("mcp23017@21:GPB0 Level after a rise: low")
	}
	set("GPIO19", true)
	if got := ev.next(t); got.Input != 2 || !got.High {
		t.Errorf("event %+v, want input 2 (GPIO19) high: the rise of input 3 is not reported", got)
	}
	// The rising-edge input: its fall is not reported.
	set("GPIO26", true)
	if got := ev.next(t); got.Input != 5 || !got.High {
		t.Errorf("event %+v, want input 5 high (rising)", got)
	}
	set("GPIO26", false)
	if mustInputLevel(t, b, "GPIO26") {
		t.Error("GPIO26 Level after a fall: high")
	}
	set("GPIO13", false)
	if got := ev.next(t); got.Input != 4 || got.High {
		t.Errorf("event %+v, want input 4 (GPIO13) low: the fall of input 5 is not reported", got)
	}

	// Close stops the reports: nothing after it, and Level says closed.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	n := len(ev.all())
	set("GPIO6", false)
	set("GPIO5", true)
	time.Sleep(10 * simInputPoll) // ten polls, for a goroutine that Close left running
	if got := ev.all(); len(got) != n {
		t.Errorf("events after Close: %+v", got[n:])
	}
	in, _ := b.Input("GPIO5")
	if _, err := in.Level(); !errors.Is(err, errClosed) {
		t.Errorf("Level after Close = %v, want the board is closed", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("Close again: %v", err)
	}
}

// Debounce in real time: a change is reported once it lasted the debounce
// period, with the time it counted from then.
func TestSimInputDebounceRealTime(t *testing.T) {
	store := filepath.Join(t.TempDir(), "fence.db")
	ev := newSimInputEvents()
	const debounce = 60 * time.Millisecond
	b, err := Open(Options{Board: "sim", Store: store, Inputs: []InputLine{{Pin: "GPIO5", Debounce: debounce}}, OnInput: ev.on})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	set := time.Now()
	if err := SetSimInput(InputPath(store), "GPIO5", true); err != nil {
		t.Fatal(err)
	}
	got := ev.next(t)
	if !got.High || got.At.Sub(set) < debounce {
		t.Errorf("event %+v %v after the set; want high, at least %v after", got, got.At.Sub(set), debounce)
	}
	if !mustInputLevel(t, b, "GPIO5") {
		t.Error("Level after the debounced change: low")
	}
}

// fakeInputClock drives a sim board's inputs by hand: its time moves only
// when the test says, and the board polls only when the test ticks.
type fakeInputClock struct {
	mu     sync.Mutex
	t      time.Time
	tick   chan time.Time
	polled chan struct{}
}

func newFakeInputClock() (*fakeInputClock, *inputClock) {
	f := &fakeInputClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), tick: make(chan time.Time), polled: make(chan struct{})}
	return f, &inputClock{
		now:    func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t },
		tick:   f.tick,
		polled: func() { f.polled <- struct{}{} },
	}
}

// step moves the time on by d, then has the board poll, and waits until
// it delivered what it found.
func (f *fakeInputClock) step(d time.Duration) time.Time {
	f.mu.Lock()
	f.t = f.t.Add(d)
	now := f.t
	f.mu.Unlock()
	f.tick <- now
	<-f.polled
	return now
}

// openFakeClockSim opens a sim board's inputs on a fake clock.
func openFakeClockSim(t *testing.T, ins []InputLine, onInput func(InputEvent)) (*Sim, string, *fakeInputClock) {
	t.Helper()
	store := filepath.Join(t.TempDir(), "fence.db")
	lines, err := simInputLines(nil, ins)
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenSim(LatchPath(store))
	if err != nil {
		t.Fatal(err)
	}
	f, clock := newFakeInputClock()
	if err := s.openInputs(InputPath(store), lines, onInput, clock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, InputPath(store), f
}

// Debounce, on a clock the test moves: a pulse shorter than the period is
// never reported and never Level; a level that lasts the period is, at the
// end of it; a bouncing change counts from its last bounce.
func TestSimInputDebounce(t *testing.T) {
	ev := newSimInputEvents()
	const debounce = 50 * time.Millisecond
	s, path, clk := openFakeClockSim(t, []InputLine{{Pin: "GPIO5", Debounce: debounce}, {Pin: "GPIO6", Pull: PullUp}}, ev.on)
	set := func(pin string, high bool) {
		t.Helper()
		if err := SetSimInput(path, pin, high); err != nil {
			t.Fatal(err)
		}
	}
	level := func(pin string) bool { return mustInputLevel(t, s, pin) }
	expect := func(step string, want []InputEvent) {
		t.Helper()
		if got := ev.all(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("%s: events %+v, want %+v", step, got, want)
		}
	}

	// A glitch: high for 49 ms of the board's time, then low again.
	set("GPIO5", true)
	clk.step(0)
	if level("GPIO5") {
		t.Error("glitch: Level high as soon as seen, want low until the debounce period passed")
	}
	clk.step(debounce - time.Millisecond)
	if level("GPIO5") {
		t.Error("glitch: Level high 1 ms before the debounce period passed")
	}
	set("GPIO5", false)
	clk.step(time.Millisecond) // the period would have ended now
	clk.step(10 * debounce)
	expect("a glitch shorter than the debounce", nil)
	if level("GPIO5") {
		t.Error("after the glitch: Level high")
	}

	// A bouncing rise: high, low, high; the period counts from the last.
	set("GPIO5", true)
	clk.step(0)
	clk.step(30 * time.Millisecond)
	set("GPIO5", false)
	clk.step(5 * time.Millisecond)
	set("GPIO5", true)
	clk.step(5 * time.Millisecond)
	last := clk.step(debounce - time.Millisecond) // 49 ms since the last bounce
	expect("bouncing, 49 ms since the last bounce", nil)
	at := clk.step(time.Millisecond)
	expect("50 ms since the last bounce", []InputEvent{{Input: 0, High: true, At: at}})
	if !level("GPIO5") {
		t.Error("after the debounced rise: Level low")
	}
	if at.Sub(last) != time.Millisecond {
		t.Fatal("the fake clock moved by itself")
	}

	// Without debounce, a change counts when it is seen: the next poll, or
	// Level, which polls.
	set("GPIO6", false)
	if level("GPIO6") {
		t.Error("GPIO6 (no debounce): Level high after the set")
	}
	clk.step(time.Millisecond)
	want := []InputEvent{{Input: 0, High: true, At: at}, {Input: 1, High: false, At: at}} // seen by Level, at its time
	expect("GPIO6's fall, seen by Level", want)
}

// Close waits for a call of OnInput that is under way, and none follows:
// two changes found in one poll, Close while the first is reported.
func TestSimInputCloseStopsReports(t *testing.T) {
	entered := make(chan InputEvent, 2)
	release := make(chan struct{})
	s, path, clk := openFakeClockSim(t, []InputLine{{Pin: "GPIO5"}, {Pin: "GPIO6"}}, func(ev InputEvent) {
		entered <- ev
		<-release
	})
	// Both lines change in one replacement of the file.
	tmp := path + ".test"
	if err := os.WriteFile(tmp, []byte(`{"GPIO5":"high","GPIO6":"high"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	go clk.step(0)
	if first := <-entered; first.Input != 0 {
		t.Fatalf("first event %+v, want input 0", first)
	}
	in, _ := s.Input("GPIO5")
	closeWhileReporting(t, s, in, entered, release)
}

// closeWhileReporting closes b while its OnInput, which sent a first
// change to entered, waits for release: Close must wait for that call to
// return, and no other follows. in's Level says when Close has begun.
func closeWhileReporting(t *testing.T, b Board, in Input, entered <-chan InputEvent, release chan struct{}) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		b.Close()
		close(closed)
	}()
	for { // until Close has begun (and no OnInput can start): Level says closed
		if _, err := in.Level(); errors.Is(err, errClosed) {
			break
		}
	}
	select {
	case <-closed:
		t.Fatal("Close returned while OnInput was still running")
	default:
	}
	close(release)
	<-closed
	select {
	case ev := <-entered:
		t.Errorf("OnInput called for %+v after Close began", ev)
	default:
	}
}

// Bad inputs are refused by Open and Check, which name them, and Open
// then writes nothing.
func TestSimInputsBad(t *testing.T) {
	for _, c := range []struct {
		name  string
		outs  []Line
		ins   []InputLine
		frags []string
	}{
		{"unknown pin", nil, []InputLine{{Pin: "GPIO30"}}, []string{"GPIO30 is not on the 40-pin header"}},
		{"ground", nil, []InputLine{{Pin: "PIN9"}}, []string{"header position 9 is ground"}},
		{"unknown chip", nil, []InputLine{{Pin: "mcp23017@29:0"}}, []string{"no GPIO chip mcp23017@29"}},
		{"unknown line", nil, []InputLine{{Pin: "pcf8574@27:P8"}}, []string{"chip pcf8574@27 has no line P8"}},
		{"input is an output", []Line{{Pin: "GPIO5"}}, []InputLine{{Pin: "GPIO6"}, {Pin: "PIN29"}},
			[]string{"input PIN29 and output GPIO5 are the same line, GPIO5 (header pin 29)", "not both"}},
		{"chip input is an output", []Line{{Pin: "gpiochip1:3"}}, []InputLine{{Pin: "mcp23017@20:GPA3"}},
			[]string{"input mcp23017@20:GPA3 and output gpiochip1:3 are the same line, line 3 of GPIO chip mcp23017@20"}},
		{"input twice", nil, []InputLine{{Pin: "GPIO5"}, {Pin: "BCM5"}}, []string{"GPIO5 (header pin 29) is opened twice as an input"}},
		{"output twice", []Line{{Pin: "GPIO5"}, {Pin: "PIN29"}}, []InputLine{{Pin: "GPIO6"}}, []string{"GPIO5 (header pin 29) is opened twice"}},
		{"pull", nil, []InputLine{{Pin: "GPIO5", Pull: "sideways"}}, []string{`input 0 (GPIO5): pull "sideways" (want none, up or down)`}},
		{"edge", nil, []InputLine{{Pin: "GPIO5"}, {Pin: "GPIO6", Edge: "up"}}, []string{`input 1 (GPIO6): edge "up" (want both, rising or falling)`}},
		{"debounce", nil, []InputLine{{Pin: "GPIO5", Debounce: -time.Millisecond}}, []string{"input 0 (GPIO5): debounce -1ms"}},
	} {
		dir := t.TempDir()
		store := filepath.Join(dir, "fence.db")
		o := Options{Board: "sim", Store: store, Lines: c.outs, Inputs: c.ins, OnInput: func(InputEvent) {}}
		b, err := Open(o)
		if err == nil {
			b.Close()
		}
		_, cerr := Check(o)
		for what, err := range map[string]error{"Open": err, "Check": cerr} {
			if err == nil {
				t.Errorf("%s: %s succeeded, want an error", c.name, what)
				continue
			}
			for _, f := range c.frags {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("%s: %s error %q does not say %q", c.name, what, err, f)
				}
			}
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s: the refused Open left %d files (a latch?)", c.name, len(entries))
		}
	}

	// A bad input file is refused by Open and Check, which name it.
	store := filepath.Join(t.TempDir(), "fence.db")
	if err := os.WriteFile(InputPath(store), []byte(`{"GPIO5":"up"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	o := Options{Board: "sim", Store: store, Inputs: []InputLine{{Pin: "GPIO5"}}}
	if _, err := Open(o); err == nil || !strings.Contains(err.Error(), InputPath(store)) {
		t.Errorf("Open with a bad input file: %v", err)
	}
	if _, err := Check(o); err == nil || !strings.Contains(err.Error(), InputPath(store)) {
		t.Errorf("Check with a bad input file: %v", err)
	}
	if _, err := os.Stat(LatchPath(store)); err == nil {
		t.Error("Open with a bad input file wrote the latch")
	}
	// A board without inputs does not read it.
	if b, err := Open(Options{Board: "sim", Store: store, Lines: []Line{{Pin: "GPIO17"}}}); err != nil {
		t.Errorf("Open without inputs, with a bad input file: %v", err)
	} else {
		b.Close()
	}
	if _, err := Check(Options{Board: "sim", Store: store}); err != nil {
		t.Errorf("Check without inputs, with a bad input file: %v", err)
	}

	// A good one: Check says where the inputs are.
	if err := os.Remove(InputPath(store)); err != nil {
		t.Fatal(err)
	}
	r, err := Check(o)
	if err != nil || !strings.Contains(r.Board, "inputs "+InputPath(store)) {
		t.Errorf("Check = %+v, %v; want the board with its input file", r, err)
	}
}

// A board whose input file goes bad says so on Level, and keeps reporting
// once it is good again.
func TestSimInputFileGoesBad(t *testing.T) {
	ev := newSimInputEvents()
	s, path, clk := openFakeClockSim(t, []InputLine{{Pin: "GPIO5"}}, ev.on)
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	clk.step(time.Millisecond)
	in, _ := s.Input("GPIO5")
	if _, err := in.Level(); err == nil || !strings.Contains(err.Error(), "sim inputs "+path) {
		t.Errorf("Level with a bad file = %v, want an error naming it", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := SetSimInput(path, "GPIO5", true); err != nil {
		t.Fatal(err)
	}
	at := clk.step(time.Millisecond)
	if got, want := ev.all(), []InputEvent{{Input: 0, High: true, At: at}}; !reflect.DeepEqual(got, want) {
		t.Errorf("events %+v, want %+v", got, want)
	}
	if high, err := in.Level(); err != nil || !high {
		t.Errorf("Level = %v, %v; want high", high, err)
	}
}
