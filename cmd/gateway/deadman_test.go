package main

import (
	"strings"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestDeadmanProcess: a real gateway whose holder
// vanishes: after the scope's dead-man time without a command, its output
// goes to the safe state, the retained state says why, and the fence has
// not moved: the vanished holder's older token is stale, the next
// holder's command is applied at once.
func TestDeadmanProcess(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	g := startGateway(t, broker, "actuators:\n  - {name: pump, pin: GPIO17}\nscopes:\n  - {name: pump, safe: {after: 700ms, state: \"off\"}}\n", true)
	on := fence.Command{ID: testenv.ID(t, "on"), Holder: "ctl-a", Actuator: "pump", Fence: fence.Fence{Token: 10, Seq: 4}, State: fence.StateOn}
	if res := g.ctl.Send(t, on); res.Outcome != fence.Applied {
		t.Fatalf("on answered %+v", res)
	}
	st := g.ctl.State(t, "pump", func(o fence.Output) bool { return o.State == fence.StateOff && o.Holder == "safe" })
	if st.Fence != on.Fence || st.Holder != "safe" || !strings.Contains(st.Why, "dead-man: no command raised scope pump's fence for 700ms") {
		t.Errorf("retained state after the dead-man = %+v, want off at %v, why dead-man", st, on.Fence)
	}
	if a := apiStatus(t, g.http)["pump"]; a.Level != "low" || a.Why == "" {
		t.Errorf("API pump = %+v, want low, with why", a)
	}
	stale := fence.Command{ID: testenv.ID(t, "late"), Holder: "ctl-a", Actuator: "pump", Fence: fence.Fence{Token: 10, Seq: 4}, State: fence.StateOn}
	if res := g.ctl.Send(t, stale); res.Outcome != fence.Stale {
		t.Errorf("the vanished holder's command after the dead-man = %+v, want stale", res)
	}
	next := fence.Command{ID: testenv.ID(t, "next"), Holder: "ctl-b", Actuator: "pump", Fence: fence.Fence{Token: 11}, State: fence.StateOn}
	if res := g.ctl.Send(t, next); res.Outcome != fence.Applied || res.State != fence.StateOn {
		t.Errorf("the next holder's command = %+v, want applied, on", res)
	}
}
