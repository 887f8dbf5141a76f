package service

import (
	"fmt"
	"os"
	"strings"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/modbusio"
)

// openModbus makes the outputs on the configuration's Modbus buses. No
// bus is reached here: a bus connects at its first request, when the
// bank drives its outputs (driveOutputs), and a device that does not
// answer then is a watched output that is down, not a failed start.
func (g *gateway) openModbus() error {
	g.modbus = map[string]*modbusio.Output{}
	buses := map[string]*modbusio.Bus{}
	for i := range g.cfg.Modbus {
		b := &g.cfg.Modbus[i]
		bus, err := modbusio.NewBus(b.Conf())
		if err != nil {
			return fmt.Errorf("service: modbus bus %s: %w", b.Name, err)
		}
		buses[b.Name] = bus
		g.stops = append(g.stops, func() { bus.Close() })
	}
	for _, a := range g.cfg.Actuators {
		if a.Modbus == nil {
			continue
		}
		out, err := buses[a.Modbus.Bus].Output(a.Modbus.Conf())
		if err != nil {
			return fmt.Errorf("service: actuator %s: %w", a.Name, err)
		}
		g.modbus[a.Output()] = out
	}
	return nil
}

// pin returns an output by its canonical name: on a Modbus bus, or the
// board's.
func (g *gateway) pin(name string) (actuator.Pin, error) {
	if p, ok := g.modbus[name]; ok {
		return p, nil
	}
	return g.board.Pin(name)
}

// modbusFindings are gateway check's findings on the Modbus buses: what
// each carries, checked without a request on it (run reaches a device
// when it drives its outputs, and retries one that does not answer). A
// serial port that is not there is a warning: run would start with its
// outputs down.
func modbusFindings(cfg *config.Config) []Finding {
	var out []Finding
	for _, b := range cfg.Modbus {
		var names []string
		for _, a := range cfg.Actuators {
			if a.Modbus != nil && a.Modbus.Bus == b.Name {
				names = append(names, a.Name)
			}
		}
		text := fmt.Sprintf("bus %s (%s): actuators %s; not contacted (run reaches the devices when it drives them)", b.Name, b.URL, strings.Join(names, ", "))
		if len(names) == 0 {
			text = fmt.Sprintf("bus %s (%s): no actuator uses it", b.Name, b.URL)
		}
		out = append(out, Finding{Step: "modbus", Text: text, Warning: len(names) == 0})
		if port, ok := strings.CutPrefix(b.URL, "rtu://"); ok {
			if _, err := os.Stat(port); err != nil {
				out = append(out, Finding{Step: "modbus", Warning: true,
					Text: fmt.Sprintf("bus %s: serial port %s: %v (run would start with its outputs down until it appears: is the adapter plugged in, and is the gateway's user in group dialout?)", b.Name, port, err)})
			}
		}
	}
	return out
}
