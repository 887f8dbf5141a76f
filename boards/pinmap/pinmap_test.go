package pinmap

import (
	"fmt"
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

func TestChipLine(t *testing.T) {
	for _, c := range []struct{ chip, line, want, err string }{
		{"mcp23017", "3", "mcp23017:3", ""},
		{" mcp23017@20 ", "007", "mcp23017@20:7", ""},
		{"/dev/gpiochip2", "P4", "/dev/gpiochip2:P4", ""},
		{"", "3", "", "name its chip"},
		{"mcp23017", "", "", "name the line"},
		{"mcp 23017", "3", "", "no spaces or colons"},
		{"mcp23017", "a:b", "", "no spaces or colons"},
		{"mcp23017", "65536", "", "0 to 65535"},
	} {
		got, err := ChipLine(c.chip, c.line)
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("ChipLine(%q, %q) = %q, %v, want %q", c.chip, c.line, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ChipLine(%q, %q) = %q, %v, want an error saying %q", c.chip, c.line, got, err, c.err)
		}
	}
	if g, err := Canonical("mcp23017:03"); err != nil || g != "mcp23017:3" {
		t.Errorf("Canonical(mcp23017:03) = %q, %v", g, err)
	}
	if d := Describe("mcp23017:3"); d != "line 3 of GPIO chip mcp23017" {
		t.Errorf("Describe = %q", d)
	}
}

func TestPowerOnWarning(t *testing.T) {
	for _, c := range []struct {
		label     string
		activeLow bool
		warn      string
	}{
		{"pcf8574", false, "energised"}, {"PCF8574A", false, "energised"}, {"pcf8574", true, ""},
		{"mcp23017", true, "without pull resistors"}, {"mcp23017", false, "without pull resistors"},
		{"pinctrl-bcm2835", false, ""}, {"pca9555", false, ""},
	} {
		w := PowerOnWarning(c.label, c.activeLow)
		if (c.warn == "") != (w == "") || !strings.Contains(w, c.warn) {
			t.Errorf("PowerOnWarning(%s, active low %v) = %q, want %q", c.label, c.activeLow, w, c.warn)
		}
	}
}
