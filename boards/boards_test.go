package boards

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/actuator"
)

func TestSim(t *testing.T) {
	path := filepath.Join(t.TempDir(), "latch.json")
	s, err := OpenSim(path)
	if err != nil {
		t.Fatalf("OpenSim(%s) error: %v", path, err)
	}
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	if m, err := ReadLatch(path); err != nil || len(m) != 0 {
		t.Errorf("ReadLatch(new) = %v, %v, want empty, nil", m, err)
	}

	p, err := s.Pin("GPIO17")
	if err != nil {
		t.Fatalf("Pin(GPIO17) error: %v", err)
	}
	if got := mustLevel(t, p); got {
		t.Errorf("Level() before any Out = %v, want false", got)
	}
	if err := p.Out(true); err != nil {
		t.Fatalf("Out(true) error: %v", err)
	}
	if got := mustLevel(t, p); !got {
		t.Errorf("Level() after Out(true) = %v, want true", got)
	}
	// The same line under another name sees the same level.
	alias, err := s.Pin("pin11")
	if err != nil {
		t.Fatalf("Pin(pin11) error: %v", err)
	}
	if got := mustLevel(t, alias); !got {
		t.Errorf("Pin(pin11).Level() = %v, want true (it is GPIO17)", got)
	}
	if fs, ok := p.(fmt.Stringer); !ok || fs.String() != "sim GPIO17 (header pin 11)" {
		t.Errorf("Pin(GPIO17) String = %v, want %q", p, "sim GPIO17 (header pin 11)")
	}

	other, err := s.Pin("BCM27")
	if err != nil {
		t.Fatalf("Pin(BCM27) error: %v", err)
	}
	if err := other.Out(false); err != nil {
		t.Fatalf("Out(false) error: %v", err)
	}
	want := map[string]bool{"GPIO17": true, "GPIO27": false}
	if m, err := ReadLatch(path); err != nil || !reflect.DeepEqual(m, want) {
		t.Errorf("ReadLatch = %v, %v, want %v, nil", m, err, want)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, w := string(b), `{"GPIO17":"high","GPIO27": "low"}`+"\n"; got != w {
		t.Errorf("latch file = %q, want %q", got, w)
	}

	// A second board on the same file (the next process) sees the levels.
	s2, err := OpenSim(path)
	if err != nil {
		t.Fatalf("OpenSim(%s) again error: %v", path, err)
	}
	p2, err := s2.Pin("GPIO17")
	if err != nil {
		t.Fatalf("Pin(GPIO17) error: %v", err)
	}
	if got := mustLevel(t, p2); !got {
		t.Errorf("second OpenSim: Level() = %v, want true", got)
	}
	if err := p2.Out(false); err != nil {
		t.Fatalf("Out(false) error: %v", err)
	}
	if got := mustLevel(t, p); got {
		t.Errorf("first board Level() after second board drove low = %v, want false", got)
	}
	if err := p2.Out(true); err != nil {
		t.Fatalf("Out(true) error: %v", err)
	}

	// No temporary files are left behind.
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("latch directory holds %v, want only %s", names, filepath.Base(path))
	}

	if _, err := s.Pin("PIN6"); err == nil || !strings.Contains(err.Error(), "ground") {
		t.Errorf("Pin(PIN6) error = %v, want one saying it is ground", err)
	}
}

func TestSimFault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "latch.json")
	s, err := OpenSim(path)
	if err != nil {
		t.Fatalf("OpenSim error: %v", err)
	}
	p, err := s.Pin("GPIO17")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Out(true); err != nil {
		t.Fatalf("Out(true) error: %v", err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	injected := errors.New("injected fault")
	if err := s.SetFault("PIN11", injected); err != nil {
		t.Fatalf("SetFault(PIN11) error: %v", err)
	}
	if err := p.Out(false); !errors.Is(err, injected) {
		t.Errorf("Out(false) with fault = %v, want %v", err, injected)
	}
	if got := mustLevel(t, p); !got {
		t.Errorf("Level() after failed Out(false) = %v, want true (unchanged)", got)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Errorf("latch after failed Out = %q, want %q (unchanged)", after, before)
	}

	// Other pins are not affected.
	q, err := s.Pin("GPIO27")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Out(true); err != nil {
		t.Errorf("Out(true) on another pin = %v, want nil", err)
	}

	if err := s.SetFault("GPIO17", nil); err != nil {
		t.Fatalf("SetFault(nil) error: %v", err)
	}
	if err := p.Out(false); err != nil {
		t.Errorf("Out(false) after clearing the fault = %v, want nil", err)
	}
	if got := mustLevel(t, p); got {
		t.Errorf("Level() after Out(false) = %v, want false", got)
	}

	if err := s.SetFault("PIN1", injected); err == nil {
		t.Errorf("SetFault(PIN1) = nil, want an error (power pin)")
	}
}

func TestSimCorruptLatch(t *testing.T) {
	tests := []struct {
		name    string
		content string
		frag    string
	}{
		{"not JSON", "not json", "sim latch"},
		{"truncated", `{"GPIO17":"hi`, "sim latch"},
		{"wrong level", `{"GPIO17":"on"}`, `pin GPIO17 has level "on" (want high or low)`},
		{"bool level", `{"GPIO17":true}`, "sim latch"},
		{"array", `["GPIO17"]`, "sim latch"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "latch.json")
		if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if s, err := OpenSim(path); err == nil {
			t.Errorf("%s: OpenSim = %v, nil, want an error", tt.name, s)
		} else {
			for _, f := range []string{tt.frag, path} {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("%s: OpenSim error = %q, want it to contain %q", tt.name, err, f)
				}
			}
		}
		if m, err := ReadLatch(path); err == nil {
			t.Errorf("%s: ReadLatch = %v, nil, want an error", tt.name, m)
		}
	}

	// A latch corrupted under a running board makes reads and drives fail
	// rather than silently resetting it.
	path := filepath.Join(t.TempDir(), "latch.json")
	s, err := OpenSim(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Pin("GPIO17")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := p.Level(); err == nil {
		t.Errorf("Level() on corrupt latch = %v, nil, want an error", v)
	}
	if err := p.Out(true); err == nil || !strings.Contains(err.Error(), "sim latch") {
		t.Errorf("Out(true) on corrupt latch = %v, want a sim latch error", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "garbage" {
		t.Errorf("corrupt latch after Out = %q, want it left as %q", b, "garbage")
	}
}

func TestSimUnreadableLatch(t *testing.T) {
	dir := t.TempDir()
	// A directory where the file should be cannot be read.
	if s, err := OpenSim(dir); err == nil {
		t.Errorf("OpenSim(directory) = %v, nil, want an error", s)
	} else if !strings.Contains(err.Error(), "sim latch") {
		t.Errorf("OpenSim(directory) error = %q, want it to contain %q", err, "sim latch")
	}
	// A latch in a missing directory cannot be driven (OpenSim may already
	// say so).
	s, err := OpenSim(filepath.Join(dir, "missing", "latch.json"))
	if err != nil {
		return
	}
	p, err := s.Pin("GPIO17")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Out(true); err == nil {
		t.Errorf("Out(true) in a missing directory = nil, want an error")
	}
}

func mustLevel(t *testing.T, p actuator.Pin) bool {
	t.Helper()
	v, err := p.Level()
	if err != nil {
		t.Fatalf("Level() error: %v", err)
	}
	return v
}

// A board that is not this machine is ErrBoard, which a restart cannot fix.
func TestOpenBoardNotHere(t *testing.T) {
	for _, board := range []string{"arduino", "raspberry-pi-5"} {
		_, err := Open(Options{Board: board, Store: filepath.Join(t.TempDir(), "fence.db"), Lines: []Line{{Pin: "GPIO17"}}})
		if !errors.Is(err, ErrBoard) {
			t.Errorf("Open(%q) on this machine = %v, want ErrBoard", board, err)
		}
		if _, err := Check(Options{Board: board}); !errors.Is(err, ErrBoard) {
			t.Errorf("Check(%q) on this machine = %v, want ErrBoard", board, err)
		}
	}
}

// The board reads back its own writes without reading the file, but a
// latch changed by someone else (replaced, or rewritten in place) is read
// again: its levels are seen, and kept when another pin is driven.
func TestSimSeesLatchChangedOutside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "latch.json")
	s, err := OpenSim(path)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.Pin("GPIO17")
	b, _ := s.Pin("GPIO27")
	if err := a.Out(true); err != nil {
		t.Fatal(err)
	}
	for _, change := range []struct {
		name  string
		write func(data []byte) error
	}{
		{"replaced", func(data []byte) error {
			tmp := path + ".other"
			if err := os.WriteFile(tmp, data, 0o644); err != nil {
				return err
			}
			return os.Rename(tmp, path)
		}},
		{"rewritten in place", func(data []byte) error { return os.WriteFile(path, data, 0o644) }},
	} {
		if err := change.write([]byte(`{"GPIO17":"low","GPIO27":"high"}` + "\n")); err != nil {
			t.Fatal(err)
		}
		if mustLevel(t, a) || !mustLevel(t, b) {
			t.Fatalf("%s: levels %v, %v; want the file's low, high", change.name, mustLevel(t, a), mustLevel(t, b))
		}
		if err := s.SetLevels(nil); err != nil {
			t.Fatal(err)
		}
		c, _ := s.Pin("GPIO22")
		if err := c.Out(true); err != nil {
			t.Fatal(err)
		}
		m, err := ReadLatch(path)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]bool{"GPIO17": false, "GPIO27": true, "GPIO22": true}; !reflect.DeepEqual(m, want) {
			t.Errorf("%s: after driving GPIO22 the latch is %v, want %v", change.name, m, want)
		}
		if err := a.Out(true); err != nil { // this board's own write again
			t.Fatal(err)
		}
		if err := c.Out(false); err != nil {
			t.Fatal(err)
		}
	}
}

// Drives of pins the latch already has rewrite it in place (same file,
// one write), and a reader reading meanwhile always gets whole levels:
// ReadLatch reads again whatever did not parse.
func TestSimLatchInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "latch.json")
	s, err := OpenSim(path)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.Pin("GPIO17")
	b, _ := s.Pin("GPIO27")
	if err := a.Out(false); err != nil {
		t.Fatal(err)
	}
	if err := b.Out(false); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	readErr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				readErr <- nil
				return
			default:
			}
			if _, err := ReadLatch(path); err != nil {
				readErr <- err
				return
			}
		}
	}()
	for i := range 2000 {
		if err := a.Out(i%2 == 0); err != nil {
			t.Fatal(err)
		}
		if err := b.Out(i%3 == 0); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-readErr; err != nil {
		t.Errorf("a reader saw a latch written in place: %v", err)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Error("driving pins the latch has replaced the file; want it written in place")
	}
	if m, err := ReadLatch(path); err != nil || m["GPIO17"] != false || m["GPIO27"] != false {
		t.Errorf("latch after the last drives = %v, %v; want GPIO17 low (1999 odd), GPIO27 low", m, err)
	}
}

// The sim board's expanders: a chip line by label or name, by offset or
// line name, is one line of the latch; a line opened twice under two
// names, an unknown chip or line, and the header's chip are refused.
func TestSimChipLines(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "fence.db")
	b, err := Open(Options{Board: "sim", Store: store, Lines: []Line{
		{Pin: "mcp23017@20:GPA3", InitialHigh: true}, {Pin: "gpiochip5:0"}, {Pin: "GPIO17"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, name := range []string{"mcp23017@20:GPA3", "mcp23017@20:3", "gpiochip1:3", "/dev/gpiochip1:GPA3"} {
		p, err := b.Pin(name)
		if err != nil {
			t.Fatalf("Pin(%s): %v", name, err)
		}
		if !mustLevel(t, p) {
			t.Errorf("Pin(%s) is low, want the initial high of mcp23017@20:GPA3", name)
		}
	}
	p, _ := b.Pin("pcf8574@27:P0")
	if err := p.Out(true); err != nil {
		t.Fatal(err)
	}
	m, err := ReadLatch(LatchPath(store))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]bool{"mcp23017@20:3": true, "pcf8574@27:0": true, "GPIO17": false}; !reflect.DeepEqual(m, want) {
		t.Errorf("latch = %v, want %v", m, want)
	}
	if got := len(SimChipLines()); got != 4*16+8 {
		t.Errorf("SimChipLines: %d lines, want 72", got)
	}

	for _, c := range []struct {
		lines []Line
		frags []string
	}{
		{[]Line{{Pin: "mcp23017@20:GPA3"}, {Pin: "gpiochip1:3"}}, []string{"line 3 of GPIO chip mcp23017@20 is opened twice"}},
		{[]Line{{Pin: "mcp23017@29:0"}}, []string{"no GPIO chip mcp23017@29", "mcp23017@20 (gpiochip1)", "pin:"}},
		{[]Line{{Pin: "gpiochip0:17"}}, []string{"no GPIO chip gpiochip0", "name the header's lines with pin:"}},
		{[]Line{{Pin: "mcp23017@20:16"}}, []string{"chip mcp23017@20 has no line 16", "0 to 15", "GPA0 to GPB7"}},
		{[]Line{{Pin: "pcf8574@27:GPA0"}}, []string{"chip pcf8574@27 has no line GPA0", "P0 to P7"}},
	} {
		_, err := Open(Options{Board: "sim", Store: filepath.Join(t.TempDir(), "f.db"), Lines: c.lines})
		_, cerr := Check(Options{Board: "sim", Store: filepath.Join(t.TempDir(), "f.db"), Lines: c.lines})
		for _, err := range []error{err, cerr} {
			if err == nil {
				t.Errorf("%v: opened, want an error", c.lines)
				continue
			}
			for _, f := range c.frags {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("%v: error %q does not say %q", c.lines, err, f)
				}
			}
		}
	}
}

// Check warns where a chip's power-on level energises an output before
// the gateway starts: a PCF8574's lines start high, so an output on at
// high is on; one on at low is not. An MCP23017's lines float.
func TestCheckPowerOnWarnings(t *testing.T) {
	r, err := Check(Options{Board: "sim", Store: filepath.Join(t.TempDir(), "f.db"), Lines: []Line{
		{Pin: "pcf8574@27:P0"}, {Pin: "pcf8574@27:P1", ActiveLow: true}, {Pin: "mcp23017@21:GPB0", ActiveLow: true}, {Pin: "GPIO17"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Warnings) != 2 || r.Warnings[0].Line != 0 || r.Warnings[1].Line != 2 {
		t.Fatalf("warnings %+v, want one for line 0 (pcf8574, on at high) and one for line 2 (mcp23017)", r.Warnings)
	}
	if w := r.Warnings[0].Text; !strings.Contains(w, "pcf8574 lines are high from power-on") || !strings.Contains(w, "energised") {
		t.Errorf("pcf8574 warning %q", w)
	}
	if w := r.Warnings[1].Text; !strings.Contains(w, "without pull resistors") {
		t.Errorf("mcp23017 warning %q", w)
	}
}

// TestOpenInputsBeforeTakeOver: OpenInputs opens the inputs, which read
// their level, and moves no output; TakeOver then takes the outputs over
// at the levels it is given, once, and refuses lines the board was not
// opened with (closing it).
func TestOpenInputsBeforeTakeOver(t *testing.T) {
	store := filepath.Join(t.TempDir(), "fences.db")
	before, err := OpenSim(LatchPath(store))
	if err != nil {
		t.Fatal(err)
	}
	if err := before.SetLevels([]Line{{Pin: "GPIO17", InitialHigh: true}}); err != nil {
		t.Fatal(err)
	}
	before.Close()
	if err := SetSimInput(InputPath(store), "GPIO5", true); err != nil {
		t.Fatal(err)
	}
	o := Options{Board: "sim", Store: store, Lines: []Line{{Pin: "GPIO17"}}, Inputs: []InputLine{{Pin: "GPIO5"}}}
	op, err := OpenInputs(o)
	if err != nil {
		t.Fatalf("OpenInputs: %v", err)
	}
	defer op.Close()
	in, err := op.Input("GPIO5")
	if err != nil {
		t.Fatalf("Input(GPIO5) before TakeOver: %v", err)
	}
	if high, err := in.Level(); err != nil || !high {
		t.Errorf("GPIO5 before TakeOver: %v, %v; want high", high, err)
	}
	if m, err := ReadLatch(LatchPath(store)); err != nil || !m["GPIO17"] {
		t.Errorf("latch after OpenInputs = %v, %v; want GPIO17 still high: no output is taken over before TakeOver", m, err)
	}
	b, err := op.TakeOver([]Line{{Pin: "GPIO17", InitialHigh: false}})
	if err != nil {
		t.Fatalf("TakeOver: %v", err)
	}
	if m, err := ReadLatch(LatchPath(store)); err != nil || m["GPIO17"] {
		t.Errorf("latch after TakeOver = %v, %v; want GPIO17 low, its level given", m, err)
	}
	if _, err := b.Input("GPIO5"); err != nil {
		t.Errorf("the board TakeOver returned lost its input: %v", err)
	}

	for _, bad := range []struct {
		lines []Line
		frag  string
	}{
		{[]Line{{Pin: "GPIO27"}}, "output line 0 to take over is GPIO27, but the board was opened with GPIO17 there"},
		{nil, "0 output lines to take over, but the board was opened with 1"},
	} {
		op, err := OpenInputs(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := op.TakeOver(bad.lines); err == nil || !strings.Contains(err.Error(), bad.frag) {
			t.Errorf("TakeOver(%v) = %v, want an error saying %q", bad.lines, err, bad.frag)
		}
		if m, _ := ReadLatch(LatchPath(store)); len(m) != 1 {
			t.Errorf("a refused TakeOver(%v) wrote the latch: %v", bad.lines, m)
		}
		op.Close()
	}
}
