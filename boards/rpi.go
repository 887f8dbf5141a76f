package boards

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

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
	// chips are the labels of the GPIO chip carrying the header's lines,
	// in order of preference.
	chips []string
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

// BoardRaspberryPi is the configuration name that detects the model.
const BoardRaspberryPi = "raspberry-pi"

// ErrNotRaspberryPi is returned by DetectModel for a machine that is not
// a supported Raspberry Pi.
var ErrNotRaspberryPi = errors.New("boards: not a supported Raspberry Pi")

// IsRaspberryPi reports whether board names a Raspberry Pi (detected or a
// model).
func IsRaspberryPi(board string) bool {
	if board == BoardRaspberryPi {
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

// BoardNames lists the accepted Raspberry Pi board names.
func BoardNames() []string {
	names := []string{BoardRaspberryPi}
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
	return Model{}, fmt.Errorf("%w: device tree says %q (supported: %s)", ErrNotRaspberryPi, s, strings.Join(BoardNames()[1:], ", "))
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
	if board == BoardRaspberryPi {
		if dterr != nil {
			return Model{}, dterr
		}
		return DetectModel(dt)
	}
	want, ok := ModelByBoard(board)
	if !ok {
		return Model{}, fmt.Errorf("boards: unknown board %q (want one of %s)", board, strings.Join(BoardNames(), ", "))
	}
	if dterr == nil {
		got, err := DetectModel(dt)
		if err != nil {
			return Model{}, fmt.Errorf("boards: configured %s, but %w", want.Name, err)
		}
		if got.Board != want.Board {
			return Model{}, fmt.Errorf("boards: configured %s, but this is a %s (%q); fix board: in the configuration", want.Name, got.Name, dt)
		}
	}
	return want, nil
}

// OutputSpec is one output line to open on a Raspberry Pi.
type OutputSpec struct {
	// Pin is any name Canonical accepts.
	Pin string
	// InitialHigh is the level the line is driven to when it is taken
	// over at start. Choose the level the output will be reconciled to,
	// so that nothing moves at start.
	InitialHigh bool
}
