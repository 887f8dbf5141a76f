package actuator_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
)

// waitOutput waits until name's record satisfies ok.
func (r *pulseRig) waitOutput(t *testing.T, name string, within time.Duration, ok func(fence.Output) bool) fence.Output {
	t.Helper()
	deadline := time.After(within)
	for {
		out, err := r.bank.Output(name)
		if err != nil {
			t.Fatal(err)
		}
		if ok(out) {
			return out
		}
		select {
		case <-r.changed:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s is %+v after %v", name, out, within)
		}
	}
}

// waitLow waits (a while) until pins read low in the latch, and returns
// the latch: a safe state is recorded first and driven next.
func (r *pulseRig) waitLow(t *testing.T, pins ...string) map[string]bool {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m, err := boards.ReadLatch(r.sim.Path())
		if err != nil {
			t.Fatal(err)
		}
		high := false
		for _, p := range pins {
			high = high || m[p]
		}
		if !high || time.Now().After(deadline) {
			return m
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *pulseRig) audit(t *testing.T, outcome fence.Outcome) []fencelog.Entry {
	t.Helper()
	es, err := r.log.FindAudit(fencelog.AuditQuery{Outcome: outcome, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

var deadmanSpecs = []actuator.Spec{
	{Name: "fan", PinName: "GPIO22", Scope: "climate"},
	{Name: "heater", PinName: "GPIO23", Scope: "climate"},
	{Name: "pump", PinName: "GPIO17"},
}

// TestDeadman: while the holder's commands raise the
// fence (heartbeats do), the scope keeps its outputs; once none has for
// the dead-man's time, every output of the scope goes to its safe state,
// recorded with the reason, without moving the fence: a stale holder
// stays stale and the next holder's command works at once. Stale
// commands are no sign of life. Other scopes are untouched.
func TestDeadman(t *testing.T) {
	const after = 600 * time.Millisecond
	r := newSpecRig(t, "", deadmanSpecs, &actuator.Options{Safe: map[string]actuator.Safe{"climate": {After: after, State: fence.StateOff}}})
	r.send(t, command("a-1", "fan", 10, 0, fence.StateOn), fence.Applied)
	r.send(t, command("a-2", "heater", 10, 1, fence.StateOn), fence.Applied)
	r.send(t, command("p-1", "pump", 3, 0, fence.StateOn), fence.Applied)
	// Heartbeats every 50 ms for twice the dead-man's time.
	seq := uint64(2)
	for beat := time.Duration(0); beat < 2*after; beat += 50 * time.Millisecond {
		r.send(t, command("hb", "fan", 10, seq, fence.StateNone), fence.Applied)
		seq++
		r.clock.Advance(50 * time.Millisecond)
	}
	if es := r.audit(t, fence.OutcomeSafe); len(es) != 0 {
		t.Fatalf("the dead-man fired while heartbeats came: %+v", es)
	}
	// Only stale commands from now on, until just before the dead-man's
	// time since the last heartbeat: they are no sign of life.
	for since := 50 * time.Millisecond; since < after; since += 50 * time.Millisecond {
		r.send(t, command("old", "heater", 9, 0, fence.StateOn), fence.Stale)
		r.clock.Advance(50 * time.Millisecond)
		if since == after-50*time.Millisecond {
			break // the dead-man's time is up: the advance fired it
		}
		if es := r.audit(t, fence.OutcomeSafe); len(es) != 0 {
			t.Fatalf("the dead-man fired %v after the last heartbeat, before its %v: %+v", since, after, es)
		}
	}
	lastFence := fence.Fence{Token: 10, Seq: seq - 1}
	for _, name := range []string{"fan", "heater"} {
		out := r.waitOutput(t, name, 5*time.Second, func(o fence.Output) bool { return o.State == fence.StateOff })
		if out.Fence != lastFence || !strings.Contains(out.Why, "dead-man: no command raised scope climate's fence for 600ms") || out.Holder != "safe" {
			t.Errorf("%s after the dead-man: %+v, want off at the fence %v, why dead-man", name, out, lastFence)
		}
	}
	if m := r.waitLow(t, "GPIO22", "GPIO23"); m["GPIO22"] || m["GPIO23"] || !m["GPIO17"] {
		t.Errorf("latch after the dead-man: %v; want fan and heater low, pump (another scope) still high", m)
	}
	if es := r.audit(t, fence.OutcomeSafe); len(es) != 2 {
		t.Errorf("audit: %d safe entries, want 2 (fan, heater): %+v", len(es), es)
	}
	deadman := func(name string) *actuator.DeadmanStatus {
		sts, err := r.bank.Statuses()
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range sts {
			if st.Actuator == name {
				return st.Deadman
			}
		}
		return nil
	}
	if d := deadman("fan"); d == nil || !d.Tripped || d.Left != 0 || d.After != after {
		t.Errorf("fan's dead-man after it fired: %+v, want tripped", d)
	}
	if d := deadman("pump"); d != nil {
		t.Errorf("pump (no dead-man) has %+v", d)
	}
	r.send(t, command("old-2", "fan", 10, 0, fence.StateOn), fence.Stale)
	res := r.send(t, command("b-1", "fan", 11, 0, fence.StateOn), fence.Applied)
	if res.State != fence.StateOn {
		t.Errorf("the next holder's command answered %+v, want on", res)
	}
	if out, _ := r.bank.Output("fan"); out.Why != "" {
		t.Errorf("after a command, fan's why is %q; want none", out.Why)
	}
	if d := deadman("heater"); d == nil || d.Tripped || d.Left <= after/2 || d.Left > after {
		t.Errorf("heater's dead-man after the next holder's command: %+v, want counting again from %v", d, after)
	}
}

// A scope with on_disconnect goes safe when the broker connection is
// lost; one without does not.
func TestDeadmanOnDisconnect(t *testing.T) {
	r := newSpecRig(t, "", deadmanSpecs, &actuator.Options{Safe: map[string]actuator.Safe{"climate": {State: fence.StateOff, OnDisconnect: true}}})
	r.send(t, command("a-1", "fan", 10, 0, fence.StateOn), fence.Applied)
	r.send(t, command("p-1", "pump", 3, 0, fence.StateOn), fence.Applied)
	r.bank.Disconnected(errors.New("EOF"))
	if out, _ := r.bank.Output("fan"); out.State != fence.StateOff || !strings.Contains(out.Why, "broker connection was lost (EOF)") {
		t.Errorf("fan after the lost connection: %+v, want off, why the broker", out)
	}
	if out, _ := r.bank.Output("pump"); out.State != fence.StateOn {
		t.Errorf("pump (no dead-man) after the lost connection: %+v, want on", out)
	}
}

// TestMaxOn: an output on for its max_on is switched
// off, recorded with the reason, the fence untouched; switching it off
// and on again starts the count again; an output switched off in time is
// left alone.
func TestMaxOn(t *testing.T) {
	const maxOn = 300 * time.Millisecond
	specs := []actuator.Spec{{Name: "heater", PinName: "GPIO23", MaxOn: maxOn}, {Name: "pump", PinName: "GPIO17"}}
	r := newSpecRig(t, "", specs, nil)
	r.send(t, command("h-1", "heater", 5, 0, fence.StateOn), fence.Applied)
	r.send(t, command("p-1", "pump", 5, 0, fence.StateOn), fence.Applied)
	r.clock.Advance(maxOn - time.Millisecond)
	if es := r.audit(t, fence.OutcomeMaxOn); len(es) != 0 {
		t.Errorf("max_on switched the heater off before its %v: %+v", maxOn, es)
	}
	r.clock.Advance(time.Millisecond)
	out := r.waitOutput(t, "heater", 5*time.Second, func(o fence.Output) bool { return o.State == fence.StateOff })
	if out.Fence != (fence.Fence{Token: 5}) || !strings.HasPrefix(out.Why, "max_on: on for 300ms") {
		t.Errorf("heater after max_on: %+v, want off at fence 5/0, why max_on", out)
	}
	if m := r.waitLow(t, "GPIO23"); m["GPIO23"] || !m["GPIO17"] {
		t.Errorf("latch after max_on: %v, want the heater low and the pump (no max_on) high", m)
	}
	if es := r.audit(t, fence.OutcomeMaxOn); len(es) != 1 || es[0].Actuator != "heater" {
		t.Errorf("audit: %+v, want one max-on entry for the heater", es)
	}
	// Off in time: nothing more happens.
	r.send(t, command("h-2", "heater", 5, 1, fence.StateOn), fence.Applied)
	r.send(t, command("h-3", "heater", 5, 2, fence.StateOff), fence.Applied)
	r.clock.Advance(2 * maxOn)
	if es := r.audit(t, fence.OutcomeMaxOn); len(es) != 1 {
		t.Errorf("max_on fired for an output switched off in time: %+v", es)
	}
	if out, _ := r.bank.Output("heater"); out.Holder != "ctl-h-3" {
		t.Errorf("heater %+v, want as the last command left it", out)
	}
}

// The configuration's rules: a dead-man needs a time or on_disconnect,
// and a scope with an interlock is safe off.
func TestSafeSpecs(t *testing.T) {
	specs := []actuator.Spec{{Name: "open", PinName: "GPIO5", Scope: "vent"}, {Name: "close", PinName: "GPIO6", Scope: "vent"}}
	locks := []fence.Interlock{{Name: "vent", Members: []string{"open", "close"}}}
	for _, c := range []struct {
		safe actuator.Safe
		frag string
	}{
		{actuator.Safe{State: fence.StateOff}, "give after"},
		{actuator.Safe{After: time.Second, State: fence.StateOn}, "a scope with an interlock is safe off"},
		{actuator.Safe{After: time.Second}, "state is on or off"},
	} {
		if err := actuator.CheckSafe("vent", c.safe, specs, locks, false); err == nil || !strings.Contains(err.Error(), c.frag) {
			t.Errorf("CheckSafe(%+v) = %v, want %q", c.safe, err, c.frag)
		}
	}
	if err := actuator.CheckSafe("vent", actuator.Safe{After: time.Second, State: fence.StateOff}, specs, locks, false); err != nil {
		t.Errorf("safe off for an interlocked scope: %v", err)
	}
	if err := actuator.CheckSafe("nowhere", actuator.Safe{After: time.Second, State: fence.StateOff}, specs, locks, false); err == nil {
		t.Error("a dead-man for a scope without actuators is accepted")
	}
}
