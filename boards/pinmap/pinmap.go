// Package pinmap names what fencegate's boards offer, using only the
// standard library, so that checking a configuration never loads a GPIO
// driver:
//
//   - the board names a configuration may use ("sim", "raspberry-pi" and
//     one name per supported Raspberry Pi model), and how a Raspberry Pi's
//     model is recognised from its device tree;
//   - the pins of the 40-pin header: a pin may be written GPIO17, BCM17 or
//     PIN11 (the physical header position), and all three mean the same
//     line. [Canonical] resolves a name and explains why a name is not an
//     output (unknown, power, ground);
//   - the lines of any other GPIO chip the kernel exposes (an I²C or SPI
//     expander such as an MCP23017 or a PCF8574): "chip:line", the chip
//     by its label, name or path and the line by its offset or its name
//     ([ChipLine]), and what such a chip's lines do from power-on until
//     the gateway takes them ([PowerOnOf]).
//
// Package boards opens the boards these names describe.
package pinmap

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Board names that are not a Raspberry Pi model.
const (
	// Sim is the simulated board: outputs in a latch file (see package boards).
	Sim = "sim"
	// RaspberryPi detects the Raspberry Pi model at start.
	RaspberryPi = "raspberry-pi"
)

// Boards lists every board name a configuration may use.
func Boards() []string {
	return append([]string{Sim}, RaspberryPiBoards()...)
}

// Known reports whether board is a board name this build knows.
func Known(board string) bool { return board == Sim || IsRaspberryPi(board) }

// header maps the 40-pin header's physical positions to BCM GPIO numbers;
// positions that are not GPIO name their function.
var header = [41]string{
	1: "3V3 power", 2: "5V power", 3: "GPIO2", 4: "5V power", 5: "GPIO3", 6: "ground",
	7: "GPIO4", 8: "GPIO14", 9: "ground", 10: "GPIO15", 11: "GPIO17", 12: "GPIO18",
	13: "GPIO27", 14: "ground", 15: "GPIO22", 16: "GPIO23", 17: "3V3 power", 18: "GPIO24",
	19: "GPIO10", 20: "ground", 21: "GPIO9", 22: "GPIO25", 23: "GPIO11", 24: "GPIO8",
	25: "ground", 26: "GPIO7", 27: "GPIO0", 28: "GPIO1", 29: "GPIO5", 30: "ground",
	31: "GPIO6", 32: "GPIO12", 33: "GPIO13", 34: "ground", 35: "GPIO19", 36: "GPIO16",
	37: "GPIO26", 38: "GPIO20", 39: "ground", 40: "GPIO21",
}

// HeaderPosition returns the physical header position of a canonical GPIO
// name ("GPIO17" → 11), or 0 if it is not on the header.
func HeaderPosition(gpio string) int {
	if !strings.HasPrefix(gpio, "GPIO") {
		return 0 // the table also names power and ground positions
	}
	for i, v := range header {
		if v == gpio {
			return i
		}
	}
	return 0
}

// Canonical resolves a pin name (GPIO17, BCM17, PIN11; case-insensitive) to
// its canonical form "GPIOn", and a chip line ("chip:line") to ChipLine's
// form. Names of lines that are not on the 40-pin header, or header
// positions that are power or ground, are errors.
func Canonical(name string) (string, error) {
	if chip, line, ok := strings.Cut(name, ":"); ok {
		return ChipLine(chip, line)
	}
	up := strings.ToUpper(strings.TrimSpace(name))
	num := func(prefix string) (int, bool) {
		if !strings.HasPrefix(up, prefix) {
			return 0, false
		}
		n, err := strconv.Atoi(up[len(prefix):])
		if err != nil || n < 0 || strings.HasPrefix(up[len(prefix):], "+") {
			return 0, false
		}
		return n, true
	}
	if n, ok := num("PIN"); ok {
		if n < 1 || n > 40 {
			return "", fmt.Errorf("pinmap: pin %q: the header has positions 1 to 40", name)
		}
		v := header[n]
		if !strings.HasPrefix(v, "GPIO") {
			return "", fmt.Errorf("pinmap: pin %q: header position %d is %s, not a GPIO", name, n, v)
		}
		return v, nil
	}
	n, ok := num("GPIO")
	if !ok {
		n, ok = num("BCM")
	}
	if !ok {
		return "", fmt.Errorf("pinmap: pin %q: want GPIOn, BCMn or PINn (header position)", name)
	}
	g := "GPIO" + strconv.Itoa(n)
	if HeaderPosition(g) == 0 {
		return "", fmt.Errorf("pinmap: pin %q: GPIO%d is not on the 40-pin header (GPIO0 to GPIO27 are)", name, n)
	}
	return g, nil
}

// Describe formats a canonical name for messages: a GPIO with its header
// position, "GPIO17 (header pin 11)"; a chip line as "line 3 of GPIO chip
// mcp23017".
func Describe(name string) string {
	if p := HeaderPosition(name); p != 0 {
		return fmt.Sprintf("%s (header pin %d)", name, p)
	}
	if chip, line, ok := SplitChipLine(name); ok {
		return fmt.Sprintf("line %s of GPIO chip %s", line, chip)
	}
	return name
}

// ChipLine returns the canonical name of a line of a GPIO chip other than
// the header's: "chip:line". The chip is named as the kernel names it: by
// its label (mcp23017, pcf8574; gpiodetect lists them), its name
// (gpiochip2) or its path (/dev/gpiochip2). The line is its offset on the
// chip (0, 1, …) or the name the kernel gives it (gpioinfo lists them).
// Which chip and line those are is the board's to find, when it opens
// them; ChipLine checks only the form.
func ChipLine(chip, line string) (string, error) {
	chip, line = strings.TrimSpace(chip), strings.TrimSpace(line)
	switch {
	case chip == "":
		return "", fmt.Errorf("pinmap: line %q: name its chip (its label, e.g. mcp23017, or gpiochip2)", line)
	case line == "":
		return "", fmt.Errorf("pinmap: chip %q: name the line (its offset on the chip, e.g. 0, or its name)", chip)
	case strings.ContainsAny(chip, ": \t\n"):
		return "", fmt.Errorf("pinmap: chip %q: a chip's label, name or path has no spaces or colons", chip)
	case strings.ContainsAny(line, ": \t\n"):
		return "", fmt.Errorf("pinmap: line %q of chip %s: a line's offset or name has no spaces or colons", line, chip)
	}
	if isDigits(line) {
		n, err := strconv.ParseUint(line, 10, 16)
		if err != nil {
			return "", fmt.Errorf("pinmap: line %q of chip %s: an offset is 0 to 65535", line, chip)
		}
		line = strconv.FormatUint(n, 10)
	}
	return chip + ":" + line, nil
}

// SplitChipLine splits a canonical chip line into its chip and line; ok
// is false for a header pin.
func SplitChipLine(name string) (chip, line string, ok bool) {
	return strings.Cut(name, ":")
}

// LineOffset returns a chip line's offset if the line is named by its
// offset.
func LineOffset(line string) (int, bool) {
	if !isDigits(line) {
		return 0, false
	}
	n, err := strconv.Atoi(line)
	return n, err == nil
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// PowerOn is what a chip's lines do from power-on until the gateway takes
// them over.
type PowerOn int

const (
	// PowerOnUnknown: the chip is not one PowerOnOf knows; read its
	// datasheet.
	PowerOnUnknown PowerOn = iota
	// PowerOnHigh: the lines are high (the PCF857x family's
	// quasi-bidirectional lines, pulled up weakly). A relay that is on at
	// high is energised until the gateway starts.
	PowerOnHigh
	// PowerOnFloating: the lines are inputs without pull resistors (the
	// MCP230xx family): the relay board's own input circuit decides.
	PowerOnFloating
)

// chipFamilies maps GPIO chip labels (the Linux drivers' device names) to
// their lines' power-on behaviour, from the chips' datasheets.
var chipFamilies = map[string]PowerOn{
	// drivers/gpio/gpio-pcf857x.c: quasi-bidirectional, high at power-on.
	"pcf8574": PowerOnHigh, "pcf8574a": PowerOnHigh, "pca8574": PowerOnHigh, "pca9670": PowerOnHigh,
	"pca9672": PowerOnHigh, "pca9674": PowerOnHigh, "pcf8575": PowerOnHigh, "pca8575": PowerOnHigh,
	"pca9671": PowerOnHigh, "pca9673": PowerOnHigh, "pca9675": PowerOnHigh, "max7328": PowerOnHigh,
	"max7329": PowerOnHigh,
	// drivers/pinctrl/pinctrl-mcp23s08.c: IODIR resets to inputs, GPPU
	// to no pull-ups.
	"mcp23008": PowerOnFloating, "mcp23017": PowerOnFloating, "mcp23018": PowerOnFloating,
	"mcp23s08": PowerOnFloating, "mcp23s17": PowerOnFloating, "mcp23s18": PowerOnFloating,
}

// PowerOnOf returns what the lines of the chip with this label do from
// power-on until the gateway takes them.
func PowerOnOf(label string) PowerOn {
	return chipFamilies[strings.ToLower(label)]
}

// PowerOnWarning returns why an output on a line of a chip with this
// label may be energised before the gateway starts, or "" if it is not.
// An output is energised at low if it is active-low, at high otherwise.
func PowerOnWarning(label string, activeLow bool) string {
	switch PowerOnOf(label) {
	case PowerOnHigh:
		if !activeLow {
			return fmt.Sprintf("%s lines are high from power-on until the gateway starts, and this output is on at high: its relay is energised meanwhile (use a relay board that is on at low, with active_low: true)", label)
		}
	case PowerOnFloating:
		return fmt.Sprintf("%s lines are inputs without pull resistors from power-on until the gateway starts: the relay board's own input decides whether it is energised meanwhile (check that it has a pull resistor to its off level)", label)
	}
	return ""
}

// Model is a Raspberry Pi model fencegate supports. All of them expose
// GPIO0 to GPIO27 on the same 40-pin header layout (the CM4 on its IO
// board's header).
type Model struct {
	// Board is the configuration name, e.g. "raspberry-pi-4b".
	Board string
	// Name is the model as people say it.
	Name string
	// dtPrefix is how the device tree's model string starts.
	dtPrefix string
	// Chips are the labels of the GPIO chip carrying the header's lines,
	// in order of preference.
	Chips []string
}

// Models are the supported Raspberry Pi models. More specific device-tree
// prefixes come first.
var Models = []Model{
	{"raspberry-pi-zero-2-w", "Raspberry Pi Zero 2 W", "Raspberry Pi Zero 2 W", []string{"pinctrl-bcm2835"}},
	{"raspberry-pi-3b-plus", "Raspberry Pi 3 Model B+", "Raspberry Pi 3 Model B Plus", []string{"pinctrl-bcm2835"}},
	{"raspberry-pi-3b", "Raspberry Pi 3 Model B", "Raspberry Pi 3 Model B", []string{"pinctrl-bcm2835"}},
	{"raspberry-pi-4b", "Raspberry Pi 4 Model B", "Raspberry Pi 4 Model B", []string{"pinctrl-bcm2711", "pinctrl-bcm2835"}},
	{"raspberry-pi-400", "Raspberry Pi 400", "Raspberry Pi 400", []string{"pinctrl-bcm2711", "pinctrl-bcm2835"}},
	{"raspberry-pi-5", "Raspberry Pi 5", "Raspberry Pi 5", []string{"pinctrl-rp1"}},
	{"raspberry-pi-cm4", "Raspberry Pi Compute Module 4", "Raspberry Pi Compute Module 4", []string{"pinctrl-bcm2711", "pinctrl-bcm2835"}},
}

// ErrNotRaspberryPi is returned by DetectModel for a machine that is not
// a supported Raspberry Pi.
var ErrNotRaspberryPi = errors.New("pinmap: not a supported Raspberry Pi")

// IsRaspberryPi reports whether board names a Raspberry Pi (detected or a
// model).
func IsRaspberryPi(board string) bool {
	if board == RaspberryPi {
		return true
	}
	_, ok := ModelByBoard(board)
	return ok
}

// ModelByBoard returns the model with the given configuration name.
func ModelByBoard(board string) (Model, bool) {
	for _, m := range Models {
		if m.Board == board {
			return m, true
		}
	}
	return Model{}, false
}

// RaspberryPiBoards lists the accepted Raspberry Pi board names.
func RaspberryPiBoards() []string {
	names := []string{RaspberryPi}
	for _, m := range Models {
		names = append(names, m.Board)
	}
	return names
}

// DetectModel matches a device-tree model string, as in
// /proc/device-tree/model ("Raspberry Pi 4 Model B Rev 1.5"), to a model.
func DetectModel(dtModel string) (Model, error) {
	s := strings.TrimSpace(strings.TrimRight(dtModel, "\x00"))
	for _, m := range Models {
		if strings.HasPrefix(s, m.dtPrefix) {
			return m, nil
		}
	}
	return Model{}, fmt.Errorf("%w: device tree says %q (supported: %s)", ErrNotRaspberryPi, s, strings.Join(RaspberryPiBoards()[1:], ", "))
}

// DeviceTreeModel reads this machine's device-tree model string.
func DeviceTreeModel() (string, error) {
	for _, p := range []string{"/proc/device-tree/model", "/sys/firmware/devicetree/base/model"} {
		b, err := os.ReadFile(p)
		if err == nil {
			return strings.TrimRight(string(b), "\x00\n"), nil
		}
	}
	return "", fmt.Errorf("%w: no device tree model (not a Raspberry Pi, or /proc not mounted)", ErrNotRaspberryPi)
}

// ResolveModel returns the model for a configured board name: the detected
// one for "raspberry-pi", or the named one, which must match the detected
// one when detection works.
func ResolveModel(board string) (Model, error) {
	dt, dterr := DeviceTreeModel()
	if board == RaspberryPi {
		if dterr != nil {
			return Model{}, dterr
		}
		return DetectModel(dt)
	}
	want, ok := ModelByBoard(board)
	if !ok {
		return Model{}, fmt.Errorf("pinmap: unknown board %q (want one of %s)", board, strings.Join(RaspberryPiBoards(), ", "))
	}
	if dterr == nil {
		got, err := DetectModel(dt)
		if err != nil {
			return Model{}, fmt.Errorf("pinmap: configured %s, but %w", want.Name, err)
		}
		if got.Board != want.Board {
			return Model{}, fmt.Errorf("pinmap: configured %s, but this is a %s (%q); fix board: in the configuration", want.Name, got.Name, dt)
		}
	}
	return want, nil
}

// SimChip is a GPIO chip of the sim board besides the header's: an I²C
// expander, as the kernel would expose it.
type SimChip struct {
	Label string // as the kernel labels it, with the I²C address after @
	Name  string // gpiochipN
	Lines []string
}

// Family is the chip's driver name, which PowerOnOf knows.
func (c SimChip) Family() string { return strings.SplitN(c.Label, "@", 2)[0] }

// SimChips are the sim board's expanders: four MCP23017s (16 lines each,
// named as on the chip's pinout, as gpio-line-names in a device-tree
// overlay would name them) and one PCF8574 (8 lines), so that a simulated
// gateway can have 64 actuators and more, and `gateway check` shows the
// PCF857x's power-on warning.
var SimChips = func() []SimChip {
	mcp := []string{"GPA0", "GPA1", "GPA2", "GPA3", "GPA4", "GPA5", "GPA6", "GPA7",
		"GPB0", "GPB1", "GPB2", "GPB3", "GPB4", "GPB5", "GPB6", "GPB7"}
	pcf := []string{"P0", "P1", "P2", "P3", "P4", "P5", "P6", "P7"}
	return []SimChip{
		{"mcp23017@20", "gpiochip1", mcp},
		{"mcp23017@21", "gpiochip2", mcp},
		{"mcp23017@22", "gpiochip3", mcp},
		{"mcp23017@23", "gpiochip4", mcp},
		{"pcf8574@27", "gpiochip5", pcf},
	}
}()

// SimChipLines returns the canonical names of every line of the sim
// board's expanders, chip by chip ("mcp23017@20:0", …).
func SimChipLines() []string {
	var out []string
	for _, c := range SimChips {
		for i := range c.Lines {
			out = append(out, c.Label+":"+strconv.Itoa(i))
		}
	}
	return out
}
