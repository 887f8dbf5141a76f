package boards

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fencegate/fencegate/boards/pinmap"
)

// simChip is a GPIO chip of the sim board besides the header's.
type simChip = pinmap.SimChip

// simChips are the sim board's expanders (pinmap.SimChips).
var simChips = pinmap.SimChips

// SimChipLines returns the canonical names of every line of the sim
// board's expanders, chip by chip ("mcp23017@20:0", …).
func SimChipLines() []string { return pinmap.SimChipLines() }

// simLine resolves a chip line of the sim board to its chip and its
// canonical name with the line's offset: "mcp23017@20:GPA3" and
// "gpiochip1:3" are both "mcp23017@20:3". Header pins are not chip lines
// here: name them with pin:.
func simLine(name string) (simChip, string, error) {
	chipRef, line, _ := pinmap.SplitChipLine(name)
	i := slices.IndexFunc(simChips, func(c simChip) bool {
		return c.Label == chipRef || c.Name == chipRef || "/dev/"+c.Name == chipRef
	})
	if i < 0 {
		var have []string
		for _, c := range simChips {
			have = append(have, c.Label+" ("+c.Name+")")
		}
		return simChip{}, "", notHere(fmt.Errorf("boards: sim board: no GPIO chip %s (it has %s; name the header's lines with pin:)", chipRef, strings.Join(have, ", ")))
	}
	c := simChips[i]
	n, ok := pinmap.LineOffset(line)
	if !ok {
		n = slices.Index(c.Lines, line)
	}
	if n < 0 || n >= len(c.Lines) {
		return simChip{}, "", notHere(fmt.Errorf("boards: sim board: chip %s has no line %s (it has offsets 0 to %d, named %s to %s)",
			c.Label, line, len(c.Lines)-1, c.Lines[0], c.Lines[len(c.Lines)-1]))
	}
	return c, c.Label + ":" + strconv.Itoa(n), nil
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
