// Package boards provides the outputs of the boards fencegate runs on, and
// their pin maps.
//
// Every board names pins the way the Raspberry Pi's 40-pin header does: a
// pin may be written GPIO17, BCM17 or PIN11 (the physical header position),
// and all three mean the same line. [Canonical] resolves a name and explains
// why a name is not an output (unknown, power, ground).
//
// The sim board ([OpenSim]) keeps its levels in a small file, a latch that
// outlives the gateway process as a real output does.
package boards

import (
	"fmt"
	"strconv"
	"strings"
)

// Pin is one output line. It is the interface package actuator consumes.
type Pin interface {
	// Out drives the line high (true) or low (false).
	Out(high bool) error
	// Level reads back the line's level without reconfiguring it.
	Level() (bool, error)
}

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
			return "", fmt.Errorf("boards: pin %q: the header has positions 1 to 40", name)
		}
		v := header[n]
		if !strings.HasPrefix(v, "GPIO") {
			return "", fmt.Errorf("boards: pin %q: header position %d is %s, not a GPIO", name, n, v)
		}
		return v, nil
	}
	n, ok := num("GPIO")
	if !ok {
		n, ok = num("BCM")
	}
	if !ok {
		return "", fmt.Errorf("boards: pin %q: want GPIOn, BCMn or PINn (header position)", name)
	}
	g := "GPIO" + strconv.Itoa(n)
	if HeaderPosition(g) == 0 {
		return "", fmt.Errorf("boards: pin %q: GPIO%d is not on the 40-pin header (GPIO0 to GPIO27 are)", name, n)
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
