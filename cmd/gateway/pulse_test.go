package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

const doorActuators = "actuators:\n  - {name: door, pin: GPIO5, kind: pulse, pulse: 100ms, max_pulse: 10s}\n"

// TestPulseKilledMidPulse: a gateway killed with
// SIGKILL while a pulse runs leaves the line where it was; the next start
// takes it over at rest, records the pulse interrupted, and the broker's
// redelivery of the pulse (never acknowledged: the answer went out, but
// the process died first, or not) is a duplicate that says interrupted:
// the door is never opened twice.
func TestPulseKilledMidPulse(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	g := startGateway(t, broker, doorActuators, true)
	latch := boards.LatchPath(filepath.Join(g.dir, "fence.db"))
	c := fence.Command{ID: testenv.ID(t, "open"), Holder: "ctl-a", Actuator: "door", Fence: fence.Fence{Token: 10, Seq: 1}, State: fence.StateOn, Pulse: 5 * time.Second}
	res := g.ctl.Send(t, c)
	if res.Outcome != fence.Applied || res.Pulse == nil || res.Pulse.Status != fence.PulseRunning {
		t.Fatalf("pulse answered %+v (pulse %+v), want applied, running", res, res.Pulse)
	}
	if l, _ := boards.ReadLatch(latch); !l["GPIO5"] {
		t.Fatal("the door's line is low while its pulse runs")
	}
	g.p.cmd.Process.Kill()
	<-g.p.done
	if ws, ok := g.p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("gateway exit = %v, want killed", g.p.cmd.ProcessState)
	}
	if l, _ := boards.ReadLatch(latch); !l["GPIO5"] {
		t.Fatal("the door's line went low with the kill; the test would not show the restart's work")
	}

	// The same id, gateway and store: a restart.
	p := startProc(t, nil, "run", "--config", g.cfg, "--log-level", "warn")
	g.ctl.WaitStatus(t, "online")
	waitAPI(t, g.http, p)
	if l, _ := boards.ReadLatch(latch); l["GPIO5"] {
		t.Error("the door's line is high after the restart; want it at rest")
	}
	// The gateway is online, so past its reconciliation: the API shows
	// the door as the retained state will, and nothing changes it now.
	// Waiting for that state would only delay the failure.
	a := apiStatus(t, g.http)["door"]
	if a.State != "off" || a.Level != "low" || a.Pulse == nil || a.Pulse.Status != fence.PulseInterrupted || a.Pulse.Fence != c.Fence || a.Kind != "pulse" {
		t.Fatalf("API door after the restart = %+v (pulse %+v), want off, low, pulse %v interrupted", a, a.Pulse, c.Fence)
	}
	state := g.ctl.State(t, "door", func(o fence.Output) bool { return o.Pulse != nil && o.Pulse.Status == fence.PulseInterrupted })
	if state.State != fence.StateOff {
		t.Errorf("retained state after the restart = %+v, want off", state)
	}
	// The redelivery, as a broker or a resending controller makes it.
	g.ctl.Drain()
	g.ctl.Publish(t, "door", wire.EncodeCommand(c), false)
	again := g.ctl.Result(t, c.ID)
	if again.Outcome != fence.Duplicate || again.Pulse == nil || again.Pulse.Status != fence.PulseInterrupted || again.State != fence.StateOff {
		t.Errorf("redelivered pulse = %+v (pulse %+v), want duplicate, off, interrupted", again, again.Pulse)
	}
	if a := apiStatus(t, g.http)["door"]; a.Drives == nil || *a.Drives != 1 || a.Level != "low" {
		t.Errorf("door after the redelivery: %d drives, level %s; want 1 (to rest at start), low", deref(a.Drives), a.Level)
	}
	if out := p.output(); !strings.Contains(out, "pulse interrupted by a stop of the gateway") {
		t.Errorf("the restart's log does not say the pulse was interrupted:\n%s", out)
	}
}

// gateway send pulse: a pulse of --pulse, answered running, and back at
// rest after it; a pulse to a switch is refused with the reason.
func TestSendPulse(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	g := startGateway(t, broker, doorActuators+"  - {name: pump, pin: GPIO17}\n", true)
	send := func(args ...string) (string, int) {
		return runCLI(t, append([]string{"send", "--broker", broker, "--gateway", g.id, "--timeout", "5s"}, args...)...)
	}
	out, code := send("--actuator", "door", "--token", "3", "--pulse", "150ms", "pulse")
	if code != 0 || !strings.Contains(out, `"pulse":{`) || !strings.Contains(out, `"width_ms":150,"status":"running"`) {
		t.Fatalf("send pulse: exit %d\n%s", code, out)
	}
	g.ctl.State(t, "door", func(o fence.Output) bool {
		return o.Pulse != nil && o.Pulse.Status == fence.PulseDone && o.State == fence.StateOff
	})
	out, code = send("--actuator", "pump", "--token", "3", "--pulse", "100ms", "pulse")
	if code != exitRejected || !strings.Contains(out, "pump is not a pulse output") {
		t.Errorf("send pulse to a switch: exit %d, want %d and the reason\n%s", code, exitRejected, out)
	}
	for _, bad := range [][]string{{"--pulse", "1500us", "pulse"}, {"pulse"}, {"--pulse", "1s", "on"}} {
		if out, code := send(append([]string{"--actuator", "door", "--token", "4"}, bad...)...); code != 64 || !strings.Contains(out, "--pulse") {
			t.Errorf("send %q: exit %d, want 64 and what --pulse wants\n%s", bad, code, out)
		}
	}
	// on is the default pulse.
	if out, code := send("--actuator", "door", "--token", "4", "on"); code != 0 || !strings.Contains(out, `"width_ms":100,"status":"running"`) {
		t.Errorf("send on to the door: exit %d, want its default pulse of 100ms\n%s", code, out)
	}
}

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

// TestOverlappingPulsesProcess: a second pulse while the first runs, on a
// real gateway, is refused busy, and its pair raises the fence; the line
// was high once, for the first pulse only.
func TestOverlappingPulsesProcess(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	g := startGateway(t, broker, doorActuators, true)
	first := fence.Command{ID: testenv.ID(t, "p1"), Holder: "ctl-a", Actuator: "door", Fence: fence.Fence{Token: 4, Seq: 1}, State: fence.StateOn, Pulse: 600 * time.Millisecond}
	second := fence.Command{ID: testenv.ID(t, "p2"), Holder: "ctl-b", Actuator: "door", Fence: fence.Fence{Token: 5}, State: fence.StateOn, Pulse: 600 * time.Millisecond}
	if res := g.ctl.Send(t, first); res.Outcome != fence.Applied {
		t.Fatalf("first pulse = %+v", res)
	}
	res := g.ctl.Send(t, second)
	if res.Outcome != fence.Rejected || res.Reason != fence.ReasonBusy || res.Fence != second.Fence {
		t.Errorf("second pulse while the first runs = %+v, want rejected busy at fence %v", res, second.Fence)
	}
	st := g.ctl.State(t, "door", func(o fence.Output) bool { return o.Pulse != nil && o.Pulse.Status == fence.PulseDone })
	if st.Pulse.Fence != first.Fence || st.State != fence.StateOff {
		t.Errorf("door after the pulses = %+v (pulse %+v), want the first pulse done, off", st, st.Pulse)
	}
	if a := apiStatus(t, g.http)["door"]; a.Drives == nil || *a.Drives != 3 {
		t.Errorf("door drives = %d, want 3 (rest at start, on and off for the first pulse only)", deref(a.Drives))
	}
}

// TestMaxOnProcess on a real gateway: an output on for
// its max_on is switched off, the retained state says why, and the fence
// is where the last command left it.
func TestMaxOnProcess(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	g := startGateway(t, broker, "actuators:\n  - {name: heater, pin: GPIO23, max_on: 400ms}\n", true)
	on := fence.Command{ID: testenv.ID(t, "on"), Holder: "ctl-a", Actuator: "heater", Fence: fence.Fence{Token: 8, Seq: 2}, State: fence.StateOn}
	if res := g.ctl.Send(t, on); res.Outcome != fence.Applied {
		t.Fatalf("on = %+v", res)
	}
	st := g.ctl.State(t, "heater", func(o fence.Output) bool { return o.State == fence.StateOff && o.Holder == "max-on" })
	if st.Fence != on.Fence || !strings.HasPrefix(st.Why, "max_on: on for 400ms") {
		t.Errorf("heater after max_on = %+v, want off at %v, why max_on", st, on.Fence)
	}
	if a := apiStatus(t, g.http)["heater"]; a.Level != "low" {
		t.Errorf("heater's line after max_on = %s, want low", a.Level)
	}
}
