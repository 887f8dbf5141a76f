package boards

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fencegate/fencegate/boards/pinmap"
)

// simChip is a GPIO chip of the sim board besides the header's: an I²C
// expander, as the kernel would expose it.
type simChip struct {
	label string // as the kernel labels it, with the I²C address after @
	name  string // gpiochipN
	lines []string
}

// family is the chip's driver name, which pinmap.PowerOnOf knows.
func (c simChip) family() string { return strings.SplitN(c.label, "@", 2)[0] }

// simChips are the sim board's expanders: four MCP23017s (16 lines each,
// named as on the chip's pinout, as gpio-line-names in a device-tree
// overlay would name them) and one PCF8574 (8 lines), so that a simulated
// gateway can have 64 actuators and more, and `gateway check` shows the
// PCF857x's power-on warning.
var simChips = func() []simChip {
	mcp := []string{"GPA0", "GPA1", "GPA2", "GPA3", "GPA4", "GPA5", "GPA6", "GPA7",
		"GPB0", "GPB1", "GPB2", "GPB3", "GPB4", "GPB5", "GPB6", "GPB7"}
	pcf := []string{"P0", "P1", "P2", "P3", "P4", "P5", "P6", "P7"}
	return []simChip{
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
	for _, c := range simChips {
		for i := range c.lines {
			out = append(out, c.label+":"+strconv.Itoa(i))
		}
	}
	return out
}

// simLine resolves a chip line of the sim board to its chip and its
// canonical name with the line's offset: "mcp23017@20:GPA3" and
// "gpiochip1:3" are both "mcp23017@20:3". Header pins are not chip lines
// here: name them with pin:.
func simLine(name string) (simChip, string, error) {
	chipRef, line, _ := pinmap.SplitChipLine(name)
	i := slices.IndexFunc(simChips, func(c simChip) bool {
		return c.label == chipRef || c.name == chipRef || "/dev/"+c.name == chipRef
	})
	if i < 0 {
		var have []string
		for _, c := range simChips {
			have = append(have, c.label+" ("+c.name+")")
		}
		return simChip{}, "", notHere(fmt.Errorf("boards: sim board: no GPIO chip %s (it has %s; name the header's lines with pin:)", chipRef, strings.Join(have, ", ")))
	}
	c := simChips[i]
	n, ok := pinmap.LineOffset(line)
	if !ok {
		n = slices.Index(c.lines, line)
	}
	if n < 0 || n >= len(c.lines) {
		return simChip{}, "", notHere(fmt.Errorf("boards: sim board: chip %s has no line %s (it has offsets 0 to %d, named %s to %s)",
			c.label, line, len(c.lines)-1, c.lines[0], c.lines[len(c.lines)-1]))
	}
	return c, c.label + ":" + strconv.Itoa(n), nil
}

// simCanonical resolves any output name of the sim board to the name its
// latch keeps it under.
func simCanonical(name string) (string, error) {
	g, err := pinmap.Canonical(name)
	if err != nil {
		return "", err
	}
	if _, _, ok := pinmap.SplitChipLine(g); !ok {
		return g, nil
	}
	_, key, err := simLine(g)
	return key, err
}
