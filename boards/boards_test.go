package boards

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"GPIO17", "GPIO17"},
		{"BCM17", "GPIO17"},
		{"PIN11", "GPIO17"},
		{"gpio17", "GPIO17"},
		{"pin11", "GPIO17"},
		{"bcm17", "GPIO17"},
		{"Pin11", "GPIO17"},
		{" GPIO17 ", "GPIO17"},
		{"GPIO017", "GPIO17"},
		{"PIN3", "GPIO2"},
		{"PIN5", "GPIO3"},
		{"PIN40", "GPIO21"},
		{"PIN27", "GPIO0"},
		{"PIN28", "GPIO1"},
		{"PIN12", "GPIO18"},
		{"PIN13", "GPIO27"},
		{"GPIO0", "GPIO0"},
		{"BCM0", "GPIO0"},
		{"GPIO27", "GPIO27"},
	}
	for _, tt := range tests {
		got, err := Canonical(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Canonical(%q) = %q, %v, want %q, nil", tt.in, got, err, tt.want)
		}
	}
}

// pinout is the Raspberry Pi 40-pin header, written out independently of
// the table in boards.go.
var pinout = map[int]string{
	1: "3V3 power", 2: "5V power", 3: "GPIO2", 4: "5V power", 5: "GPIO3", 6: "ground",
	7: "GPIO4", 8: "GPIO14", 9: "ground", 10: "GPIO15", 11: "GPIO17", 12: "GPIO18",
	13: "GPIO27", 14: "ground", 15: "GPIO22", 16: "GPIO23", 17: "3V3 power", 18: "GPIO24",
	19: "GPIO10", 20: "ground", 21: "GPIO9", 22: "GPIO25", 23: "GPIO11", 24: "GPIO8",
	25: "ground", 26: "GPIO7", 27: "GPIO0", 28: "GPIO1", 29: "GPIO5", 30: "ground",
	31: "GPIO6", 32: "GPIO12", 33: "GPIO13", 34: "ground", 35: "GPIO19", 36: "GPIO16",
	37: "GPIO26", 38: "GPIO20", 39: "ground", 40: "GPIO21",
}

func TestCanonicalHeader(t *testing.T) {
	gpios := map[string]int{}
	for pos := 1; pos <= 40; pos++ {
		want := pinout[pos]
		name := fmt.Sprintf("PIN%d", pos)
		got, err := Canonical(name)
		if !strings.HasPrefix(want, "GPIO") {
			if err == nil {
				t.Errorf("Canonical(%q) = %q, nil, want an error (it is %s)", name, got, want)
			} else if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), name) {
				t.Errorf("Canonical(%q) error = %q, want it to name %q and %q", name, err, name, want)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v, want %q, nil", name, got, err, want)
			continue
		}
		gpios[got] = pos
		if p := HeaderPosition(got); p != pos {
			t.Errorf("HeaderPosition(%q) = %d, want %d", got, p, pos)
		}
		if d, w := Describe(got), fmt.Sprintf("%s (header pin %d)", got, pos); d != w {
			t.Errorf("Describe(%q) = %q, want %q", got, d, w)
		}
	}
	// GPIO0 to GPIO27 are each on the header exactly once, and every GPIO
	// and BCM name of them resolves.
	for n := 0; n <= 27; n++ {
		g := fmt.Sprintf("GPIO%d", n)
		if _, ok := gpios[g]; !ok {
			t.Errorf("%s is not at any header position, want it on the header", g)
		}
		for _, name := range []string{g, fmt.Sprintf("BCM%d", n), fmt.Sprintf("gpio%d", n)} {
			if got, err := Canonical(name); err != nil || got != g {
				t.Errorf("Canonical(%q) = %q, %v, want %q, nil", name, got, err, g)
			}
		}
	}
	if len(gpios) != 28 {
		t.Errorf("header has %d GPIO positions, want 28", len(gpios))
	}
}

func TestCanonicalErrors(t *testing.T) {
	tests := []struct {
		in   string
		frag string
	}{
		{"PIN1", "3V3 power"},
		{"PIN2", "5V power"},
		{"PIN4", "5V power"},
		{"PIN6", "ground"},
		{"PIN9", "ground"},
		{"PIN17", "3V3 power"},
		{"PIN39", "ground"},
		{"pin6", "ground"},
		{"PIN0", "1 to 40"},
		{"PIN41", "1 to 40"},
		{"PIN100", "1 to 40"},
		{"PIN-1", "want GPIOn, BCMn or PINn"},
		{"PIN+3", "want GPIOn, BCMn or PINn"},
		{"PIN", "want GPIOn, BCMn or PINn"},
		{"GPIO28", "not on the 40-pin header"},
		{"GPIO40", "not on the 40-pin header"},
		{"BCM28", "not on the 40-pin header"},
		{"GPIO99999999999999999999", "want GPIOn"},
		{"GPIO-1", "want GPIOn, BCMn or PINn"},
		{"GPIO+17", "want GPIOn, BCMn or PINn"},
		{"GPIO", "want GPIOn, BCMn or PINn"},
		{"GPIO 17", "want GPIOn, BCMn or PINn"},
		{"GPIO17x", "want GPIOn, BCMn or PINn"},
		{"GPIO0x11", "want GPIOn, BCMn or PINn"},
		{"17", "want GPIOn, BCMn or PINn"},
		{"foo", "want GPIOn, BCMn or PINn"},
		{"D4", "want GPIOn, BCMn or PINn"},
		{"", "want GPIOn, BCMn or PINn"},
		{"   ", "want GPIOn, BCMn or PINn"},
	}
	for _, tt := range tests {
		got, err := Canonical(tt.in)
		if err == nil {
			t.Errorf("Canonical(%q) = %q, nil, want an error containing %q", tt.in, got, tt.frag)
			continue
		}
		if got != "" {
			t.Errorf("Canonical(%q) = %q with error, want \"\"", tt.in, got)
		}
		if !strings.Contains(err.Error(), tt.frag) {
			t.Errorf("Canonical(%q) error = %q, want it to contain %q", tt.in, err, tt.frag)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.in)) {
			t.Errorf("Canonical(%q) error = %q, want it to quote the name", tt.in, err)
		}
	}
}

func TestHeaderPositionAndDescribe(t *testing.T) {
	tests := []struct {
		gpio     string
		pos      int
		describe string
	}{
		{"GPIO17", 11, "GPIO17 (header pin 11)"},
		{"GPIO2", 3, "GPIO2 (header pin 3)"},
		{"GPIO21", 40, "GPIO21 (header pin 40)"},
		{"GPIO0", 27, "GPIO0 (header pin 27)"},
		{"GPIO28", 0, "GPIO28"},
		{"ground", 0, "ground"},
		{"3V3 power", 0, "3V3 power"},
		{"", 0, ""},
	}
	for _, tt := range tests {
		if got := HeaderPosition(tt.gpio); got != tt.pos {
			t.Errorf("HeaderPosition(%q) = %d, want %d", tt.gpio, got, tt.pos)
		}
		if got := Describe(tt.gpio); got != tt.describe {
			t.Errorf("Describe(%q) = %q, want %q", tt.gpio, got, tt.describe)
		}
	}
}

func mustLevel(t *testing.T, p Pin) bool {
	t.Helper()
	v, err := p.Level()
	if err != nil {
		t.Fatalf("Level() error: %v", err)
	}
	return v
}

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
	if got, w := string(b), `{"GPIO17":"high","GPIO27":"low"}`+"\n"; got != w {
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
