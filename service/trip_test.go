package service_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/tests/testenv"
)

const tripConfig = `id: %s
mqtt: {broker: %q}
store: %s
board: sim
http: 127.0.0.1:0
actuators:
  - {name: heater, pin: GPIO6, boot: "on"}
inputs:
  - {name: overheat, pin: GPIO20, pull: down}
scopes:
  - {name: heater, trip: {input: overheat, level: high}}
`

// TestTripReadBeforeTakeOver: a trip input at its trip level when the
// gateway starts is read before the outputs are taken over, on the board
// the gateway then runs with, so that the tripped scope's output is taken
// over at its safe state and never on, though its boot rule says on: one
// drive (off, at Start), not on then off.
func TestTripReadBeforeTakeOver(t *testing.T) {
	store := filepath.Join(t.TempDir(), "fence.db")
	if err := boards.SetSimInput(boards.InputPath(store), "GPIO20", true); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(fmt.Appendf(nil, tripConfig, testenv.ID(t, "trip"), testenv.EmbeddedBroker(t), store))
	if err != nil {
		t.Fatal(err)
	}
	g := startConfig(t, cfg)
	a := g.api(t)["heater"]
	if a.Trip == "" || a.Level != "low" || a.Drives == nil || *a.Drives != 1 {
		drives := "none"
		if a.Drives != nil {
			drives = fmt.Sprint(*a.Drives)
		}
		t.Errorf("heater after a start with its trip input high: trip %q, level %s, %s drives; want tripped, low, driven once (off)", a.Trip, a.Level, drives)
	}
	if g.latch(t)["GPIO6"] {
		t.Error("the latch has GPIO6 high after the start: the tripped heater was taken over on")
	}
}
