package config

import "testing"

// A trip whose level the input's edge never reports is never acted on
// after the start: the configuration should say so.
func TestTripEdgeNeverReported(t *testing.T) {
	_, err := Parse([]byte(base + `actuators:
  - {name: heater, pin: GPIO6}
inputs:
  - {name: overheat, pin: GPIO5, edge: falling}
scopes:
  - {name: heater, trip: {input: overheat, level: high}}
`))
	if err == nil {
		t.Error("trip on overheat high accepted with edge: falling (rises are never reported, so the trip never fires)")
	}
}
