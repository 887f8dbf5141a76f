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
//     output (unknown, power, ground).
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
// its canonical form "GPIOn". Names of lines that are not on the 40-pin
// header, or header positions that are power or ground, are errors.
func Canonical(name string) (string, error) {
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

// Describe formats a canonical GPIO name with its header position, for
// messages: "GPIO17 (header pin 11)".
func Describe(gpio string) string {
	if p := HeaderPosition(gpio); p != 0 {
		return fmt.Sprintf("%s (header pin %d)", gpio, p)
	}
	return gpio
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
