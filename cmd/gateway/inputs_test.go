package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

const inputActuators = `actuators:
  - {name: gate, pin: GPIO5, requires: {input: door-closed, level: high}}
  - {name: heater, pin: GPIO6}
inputs:
  - {name: door-closed, pin: GPIO16, pull: up}
  - {name: overheat, pin: GPIO20, pull: down, debounce: 5ms}
scopes:
  - {name: heater, trip: {input: overheat, level: high}}
`

// TestInputsVetoAndTrip on a real gateway and
// the sim board's inputs file, flipped from this process as a switch
// would flip a line: each input's level is published, retained, with a
// change count the store keeps across restarts; an output that requires
// an input's level is refused without it (its pair still raises the
// fence); a trip sends its scope to the safe state and holds it until a
// reset once the input is clear.
func TestInputsVetoAndTrip(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	g := startGateway(t, broker, inputActuators, true)
	inputsFile := boards.InputPath(filepath.Join(g.dir, "fence.db"))
	flip := func(pin string, high bool) {
		t.Helper()
		if err := boards.SetSimInput(inputsFile, pin, high); err != nil {
			t.Fatal(err)
		}
	}
	in := func(name string, ok func(wire.InputState) bool) wire.InputState {
		t.Helper()
		return g.ctl.Input(t, name, ok)
	}
	door := in("door-closed", func(s wire.InputState) bool { return s.Level == "high" })
	if in("overheat", func(s wire.InputState) bool { return true }).Level != "low" || door.Seq != 1 {
		t.Errorf("inputs at start: door-closed %+v, want high seq 1 (pull up), overheat low (pull down)", door)
	}
	send := func(id, act string, token, seq uint64, st fence.State) fence.Result {
		t.Helper()
		return g.ctl.Send(t, fence.Command{ID: testenv.ID(t, id), Holder: "ctl", Actuator: act, Fence: fence.Fence{Token: token, Seq: seq}, State: st})
	}
	if res := send("g-1", "gate", 5, 1, fence.StateOn); res.Outcome != fence.Applied {
		t.Fatalf("gate on with the door closed = %+v, want applied", res)
	}
	send("g-2", "gate", 5, 2, fence.StateOff)
	flip("GPIO16", false) // the door opens
	if s := in("door-closed", func(s wire.InputState) bool { return s.Level == "low" }); s.Seq != 2 {
		t.Errorf("door-closed after it opened = %+v, want low, seq 2", s)
	}
	res := send("g-3", "gate", 5, 3, fence.StateOn)
	if res.Outcome != fence.Rejected || res.Reason != fence.ReasonInterlock || !strings.HasPrefix(res.Error, "interlock: door-closed is low") || res.Fence != (fence.Fence{Token: 5, Seq: 3}) {
		t.Errorf("gate on with the door open = %+v, want rejected interlock, door-closed is low, fence 5/3", res)
	}
	if st := send("g-4", "gate", 5, 2, fence.StateOn); st.Outcome != fence.Stale {
		t.Errorf("a command below the vetoed one's pair = %v, want stale: the veto raised the fence", st.Outcome)
	}

	// The trip.
	if res := send("h-1", "heater", 7, 0, fence.StateOn); res.Outcome != fence.Applied {
		t.Fatalf("heater on = %+v", res)
	}
	flip("GPIO20", true)
	st := g.ctl.State(t, "heater", func(o fence.Output) bool { return o.State == fence.StateOff && o.Holder == "trip" })
	if !strings.Contains(st.Why, "trip: overheat is high") || st.Fence != (fence.Fence{Token: 7}) {
		t.Errorf("heater after the trip = %+v, want off, why the trip, fence 7/0", st)
	}
	if a := apiStatus(t, g.http)["heater"]; a.Trip == "" || a.Level != "low" {
		t.Errorf("API heater after the trip = %+v, want the trip, low", a)
	}
	if res := send("h-2", "heater", 7, 1, fence.StateOn); res.Outcome != fence.Rejected || res.Reason != fence.ReasonTrip {
		t.Errorf("heater on while tripped = %+v, want rejected trip", res)
	}
	reset := func(id string, seq uint64) fence.Result {
		t.Helper()
		return g.ctl.Send(t, fence.Command{ID: testenv.ID(t, id), Holder: "ctl", Actuator: "heater", Fence: fence.Fence{Token: 7, Seq: seq}, Reset: true})
	}
	if res := reset("r-1", 2); res.Outcome != fence.Rejected || res.Reason != fence.ReasonTrip || !strings.Contains(res.Error, "cannot be reset") {
		t.Errorf("reset while overheat is high = %+v, want rejected trip, cannot be reset", res)
	}
	flip("GPIO20", false)
	in("overheat", func(s wire.InputState) bool { return s.Level == "low" })
	if res := send("h-3", "heater", 7, 3, fence.StateOn); res.Outcome != fence.Rejected || res.Reason != fence.ReasonTrip {
		t.Errorf("heater on after the input cleared, before a reset = %+v, want rejected trip: the trip latches", res)
	}
	// gateway send reset, as a person would release it.
	if out, code := runCLI(t, "send", "--broker", broker, "--gateway", g.id, "--actuator", "heater", "--token", "7", "--seq", "4", "--timeout", "5s", "reset"); code != 0 || !strings.Contains(out, `"outcome":"applied"`) {
		t.Errorf("gateway send reset once the input is clear: exit %d, want 0, applied\n%s", code, out)
	}
	if res := send("h-4", "heater", 7, 5, fence.StateOn); res.Outcome != fence.Applied {
		t.Errorf("heater on after the reset = %+v, want applied", res)
	}
	var list []httpapi.Input
	getJSON(t, "http://"+g.http+"/api/inputs", &list)
	if len(list) != 2 || list[0].Name != "door-closed" || list[0].Level != "low" || list[0].Seq != 2 || list[1].Seq != 3 {
		t.Errorf("GET /api/inputs = %+v, want door-closed low seq 2, overheat seq 3", list)
	}

	// A restart keeps the change counts.
	g.p.kill()
	p := startProc(t, nil, "run", "--config", g.cfg, "--log-level", "warn")
	g.ctl.WaitStatus(t, "online")
	waitAPI(t, g.http, p)
	getJSON(t, "http://"+g.http+"/api/inputs", &list)
	if len(list) != 2 || list[0].Seq != 2 || list[1].Seq != 3 {
		t.Errorf("GET /api/inputs after a restart = %+v, want the same seqs (2, 3)", list)
	}
}
