//go:build linux

package guest

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"

	"periph.io/x/conn/v3/driver/driverreg"
	"periph.io/x/conn/v3/gpio"
	"periph.io/x/host/v3/gpioioctl"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/boards/pinmap"
)

// TestModelDetection: the emulated board's device tree is detected as a
// Pi 3B, and the header map meets the kernel's line names.
func TestModelDetection(t *testing.T) {
	guestOnly(t)
	dt, err := pinmap.DeviceTreeModel()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("device tree model %q", dt)
	m, err := pinmap.DetectModel(dt)
	if err != nil || m.Board != "raspberry-pi-3b" {
		t.Fatalf("DetectModel(%q) = %q, %v; want raspberry-pi-3b", dt, m.Board, err)
	}
	if m, err := pinmap.ResolveModel(pinmap.RaspberryPi); err != nil || m.Board != "raspberry-pi-3b" {
		t.Fatalf("ResolveModel(raspberry-pi) = %q, %v; want raspberry-pi-3b", m.Board, err)
	}
	if _, err := pinmap.ResolveModel("raspberry-pi-3b"); err != nil {
		t.Fatalf("ResolveModel(raspberry-pi-3b): %v", err)
	}
	if _, err := pinmap.ResolveModel("raspberry-pi-4b"); err == nil || !strings.Contains(err.Error(), "this is a Raspberry Pi 3 Model B") {
		t.Fatalf("ResolveModel(raspberry-pi-4b) on a 3B: %v; want a mismatch error", err)
	}
	// The harness adds the revision the real firmware puts there.
	if b, err := os.ReadFile("/proc/device-tree/system/linux,revision"); err != nil || len(b) != 4 || binary.BigEndian.Uint32(b) != 0xa02082 {
		t.Errorf("/system/linux,revision = %x, %v; want a02082", b, err)
	}

	c := bcmChip(t)
	t.Logf("%s: label %s, %d lines", c.Path, c.Label, c.Lines)
	for pin, want := range map[string]string{"PIN11": "GPIO17", "PIN13": "GPIO27", "BCM22": "GPIO22", "pin40": "GPIO21"} {
		g, err := pinmap.Canonical(pin)
		if err != nil || g != want {
			t.Fatalf("Canonical(%s) = %s, %v; want %s", pin, g, err, want)
		}
		off, ok := c.offset(t, g)
		if !ok {
			t.Fatalf("%s → %s, but chip %s has no line named %s", pin, g, c.Label, g)
		}
		if want, _ := strconv.Atoi(strings.TrimPrefix(g, "GPIO")); off != uint32(want) {
			t.Errorf("line %s is at offset %d, want %d", g, off, want)
		}
	}
}

// TestInitialLevel: a line opened with InitialHigh is out hi right after
// OpenRaspberryPi, one opened without it out lo; Close releases both.
func TestInitialLevel(t *testing.T) {
	guestOnly(t)
	c := bcmChip(t)
	m, err := pinmap.ResolveModel(pinmap.RaspberryPi)
	if err != nil {
		t.Fatal(err)
	}
	pi, err := boards.OpenRaspberryPi(m, []boards.Line{{Pin: "GPIO22", InitialHigh: true}, {Pin: "PIN16", InitialHigh: false}})
	if err != nil {
		t.Fatal(err)
	}
	if pi.Chip != "pinctrl-bcm2835" {
		t.Errorf("opened chip %q, want pinctrl-bcm2835", pi.Chip)
	}
	expectOutput(t, c, "GPIO22", true)
	expectOutput(t, c, "GPIO23", false) // PIN16
	for name, want := range map[string]bool{"GPIO22": true, "BCM23": false} {
		p, err := pi.Pin(name)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := p.Level(); err != nil || got != want {
			t.Errorf("%s Level() = %v, %v; want %v", name, got, err, want)
		}
	}
	// Lines held by another request (here: our own) are refused with the
	// hint, and the refused request moves nothing.
	if _, err := boards.OpenRaspberryPi(m, []boards.Line{{Pin: "GPIO22", InitialHigh: false}}); err == nil || !strings.Contains(err.Error(), "is another program using these lines?") {
		t.Errorf("OpenRaspberryPi on a held line: %v; want refused with the hint", err)
	} else {
		t.Logf("a held line: %v", err)
	}
	expectOutput(t, c, "GPIO22", true)
	if err := pi.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"GPIO22", "GPIO23"} {
		off, _ := c.offset(t, name)
		if li := c.info(t, off); li.Flags&flagUsed != 0 {
			t.Errorf("%s after Close: flags %s, want not USED", name, flagWords(li.Flags))
		}
	}
}

// TestChipLineAddressed: an output named by its chip
// and line, the chip by label, name or path and the line by offset or
// name, is the same kernel line as its header pin, opened at its initial
// level in the one request of its chip, and driven and read back through
// it; naming one line twice, an unknown chip and a line the chip lacks are
// refused before anything is requested.
func TestChipLineAddressed(t *testing.T) {
	guestOnly(t)
	c := bcmChip(t)
	m, err := pinmap.ResolveModel(pinmap.RaspberryPi)
	if err != nil {
		t.Fatal(err)
	}
	pi, err := boards.OpenRaspberryPi(m, []boards.Line{
		{Pin: "pinctrl-bcm2835:5", InitialHigh: true},
		{Pin: "gpiochip0:GPIO6"},
		{Pin: "/dev/gpiochip0:16", InitialHigh: true},
		{Pin: "GPIO19"}})
	if err != nil {
		t.Fatal(err)
	}
	defer pi.Close()
	expectOutput(t, c, "GPIO5", true)
	expectOutput(t, c, "GPIO6", false)
	expectOutput(t, c, "GPIO16", true)
	expectOutput(t, c, "GPIO19", false)
	for _, step := range []struct {
		pin  string
		line string
		high bool
	}{{"gpiochip0:GPIO6", "GPIO6", true}, {"pinctrl-bcm2835:5", "GPIO5", false}, {"/dev/gpiochip0:16", "GPIO16", false}, {"GPIO19", "GPIO19", true}} {
		p, err := pi.Pin(step.pin)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Out(step.high); err != nil {
			t.Fatalf("%s Out(%v): %v", step.pin, step.high, err)
		}
		expectOutput(t, c, step.line, step.high)
		if got, err := p.Level(); err != nil || got != step.high {
			t.Errorf("%s Level() = %v, %v; want %v", step.pin, got, err, step.high)
		}
		t.Logf("%s driven %v: debugfs %q", step.pin, step.high, debugfsLine(t, step.line))
	}
	expectOutput(t, c, "GPIO5", false)
	expectOutput(t, c, "GPIO6", true)
	expectOutput(t, c, "GPIO16", false)
	expectOutput(t, c, "GPIO19", true)

	for _, bad := range []struct {
		lines []boards.Line
		frag  string
	}{
		{[]boards.Line{{Pin: "mcp23017:0"}}, "pinctrl-bcm2835 (gpiochip0)"},
		{[]boards.Line{{Pin: "GPIO20"}, {Pin: "pinctrl-bcm2835:20", InitialHigh: true}}, "are the same line (offset 20 of gpiochip0)"},
		{[]boards.Line{{Pin: "mcp23017:0"}}, "no GPIO chip mcp23017 (found "},
		{[]boards.Line{{Pin: "gpiochip0:54"}}, "has no line 54 (it has offsets 0 to 53"},
		{[]boards.Line{{Pin: "gpiochip0:GPIO99"}}, "has no line GPIO99"},
	} {
		if _, err := boards.OpenRaspberryPi(m, bad.lines); err == nil || !strings.Contains(err.Error(), bad.frag) {
			t.Errorf("OpenRaspberryPi(%v) = %v, want an error saying %q", bad.lines, err, bad.frag)
		}
		if _, err := boards.Check(boards.Options{Board: pinmap.RaspberryPi, Lines: bad.lines}); err == nil || !strings.Contains(err.Error(), bad.frag) {
			t.Errorf("Check(%v) = %v, want an error saying %q", bad.lines, err, bad.frag)
		}
	}
	if li := c.info(t, 20); li.Flags&flagUsed != 0 {
		t.Errorf("GPIO20 after refused requests: flags %s, want not USED", flagWords(li.Flags))
	}
}

// TestLevelNeverReconfigures: reading a pin back (GET_VALUES on the output
// request) leaves the line an output at its level, however often. The
// control shows that the check would catch periph's GPIOLine.Read, which
// turns an output into an input with a pull-up.
func TestLevelNeverReconfigures(t *testing.T) {
	guestOnly(t)
	c := bcmChip(t)
	m, err := pinmap.ResolveModel(pinmap.RaspberryPi)
	if err != nil {
		t.Fatal(err)
	}
	pi, err := boards.OpenRaspberryPi(m, []boards.Line{{Pin: "GPIO24"}, {Pin: "GPIO25", InitialHigh: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer pi.Close()
	p24, _ := pi.Pin("GPIO24")
	p25, _ := pi.Pin("GPIO25")
	for _, level := range []bool{true, false, true} {
		if err := p24.Out(level); err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			got, err := p24.Level()
			if err != nil || got != level {
				t.Fatalf("read %d: Level() = %v, %v; want %v", i, got, err, level)
			}
			if got, err := p25.Level(); err != nil || !got {
				t.Fatalf("read %d: GPIO25 Level() = %v, %v; want high (untouched)", i, got, err)
			}
			if i%10 == 0 {
				expectOutput(t, c, "GPIO24", level)
				expectOutput(t, c, "GPIO25", true)
			}
		}
		expectOutput(t, c, "GPIO24", level)
	}

	// Control: periph's single-line Read on an output line.
	if _, err := driverreg.Init(); err != nil {
		t.Fatal(err)
	}
	var line *gpioioctl.GPIOLine
	for _, ch := range gpioioctl.Chips {
		if ch.Label() == "pinctrl-bcm2835" {
			line = ch.ByName("GPIO26")
		}
	}
	if line == nil {
		t.Fatal("periph: no GPIO26 on pinctrl-bcm2835")
	}
	defer line.Close()
	if err := line.Out(gpio.High); err != nil {
		t.Fatal(err)
	}
	expectOutput(t, c, "GPIO26", true)
	line.Read()
	off, _ := c.offset(t, "GPIO26")
	li := c.info(t, off)
	if li.Flags&flagInput == 0 || li.Flags&flagPullUp == 0 {
		t.Fatalf("control: after GPIOLine.Read GPIO26 has flags %s; expected periph to make it INPUT|PULL_UP", flagWords(li.Flags))
	}
	t.Logf("control: periph GPIOLine.Read turned GPIO26 into %s, debugfs %q (boards never calls it)", flagWords(li.Flags), debugfsLine(t, "GPIO26"))
}

// TestRequestAtInitialLevel: the output request carries
// the initial levels, so the kernel makes each line an output at its level
// in one step. Two active-low members of an interlock (a motor's two
// directions, high is off) are requested high, on lines fresh from boot and
// again on lines a previous request left high (a restart). The kernel's
// gpio trace, which records every level gpiolib writes, must show each line
// only ever set high: never both directions on, not even for microseconds.
//
// Control: periph's LineSetFromConfig followed by Out, how boards requested
// its lines before, shows each line set low by the request and high only
// after, so the check would catch that glitch.
func TestRequestAtInitialLevel(t *testing.T) {
	guestOnly(t)
	c := bcmChip(t)
	m, err := pinmap.ResolveModel(pinmap.RaspberryPi)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"GPIO12", "GPIO13"}
	nums := map[string]int{}
	for _, n := range names {
		nums[n] = gpioNumber(t, n)
	}
	for _, when := range []string{"lines fresh from boot", "lines left high (a restart)"} {
		tr := startGPIOTrace(t)
		pi, err := boards.OpenRaspberryPi(m, []boards.Line{{Pin: "GPIO12", InitialHigh: true}, {Pin: "PIN33", InitialHigh: true}})
		events := tr.stop()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			expectOutput(t, c, n, true)
			sets := setsOf(events, nums[n])
			if len(sets) == 0 {
				t.Fatalf("%s: the trace recorded no level written to %s (gpio %d); all events: %v", when, n, nums[n], events)
			}
			for i, s := range sets {
				if s != "1" {
					t.Errorf("%s: the kernel drove %s (gpio %d) low (write %d of %v) before its initial level high; all events: %v", when, n, nums[n], i+1, sets, events)
				}
			}
			t.Logf("%s: %s (gpio %d): levels written %v", when, n, nums[n], sets)
		}
		if err := pi.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// Control: request first, set the levels after.
	if _, err := driverreg.Init(); err != nil {
		t.Fatal(err)
	}
	var chip *gpioioctl.GPIOChip
	for _, ch := range gpioioctl.Chips {
		if ch.Label() == "pinctrl-bcm2835" {
			chip = ch
		}
	}
	if chip == nil {
		t.Fatal("periph: no chip pinctrl-bcm2835")
	}
	tr := startGPIOTrace(t)
	set, err := chip.LineSetFromConfig(&gpioioctl.LineSetConfig{Lines: names, DefaultDirection: gpioioctl.LineOutput, DefaultEdge: gpio.NoEdge, DefaultPull: gpio.PullNoChange})
	if err != nil {
		tr.stop()
		t.Fatal(err)
	}
	err = set.Out(0b11, 0)
	events := tr.stop()
	defer set.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		sets := setsOf(events, nums[n])
		if len(sets) < 2 || sets[0] != "0" || sets[len(sets)-1] != "1" {
			t.Fatalf("control: %s (gpio %d): levels written %v; expected the request to drive it low first, then Out high", n, nums[n], sets)
		}
		t.Logf("control: periph LineSetFromConfig + Out: %s (gpio %d): levels written %v, low for %v (boards no longer requests this way)", n, nums[n], sets, lowFor(events, nums[n]))
	}
}
