package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestSetpointEndToEnd: a gateway process fences set-points on a Modbus
// TCP dimmer (a holding register, 0..1000) as it fences states: the boot
// set-point at start, applied, duplicate and stale set-points, bad
// duties refused without moving the fence, min/max and max_rate refused
// with their reasons, a value changed behind its back driven back, a
// power cut reconciled, the dead-man's safe set-point, and the boot
// set-point again after a kill.
func TestSetpointEndToEnd(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	mod, url := tcpModule(t)
	g := startGateway(t, broker, fmt.Sprintf(`modbus:
  - {name: relays, url: %q, poll: 200ms, timeout: 300ms}
actuators:
  - name: dimmer
    modbus: {bus: relays, unit: 1, register: 3, full: 1000}
    min: 10
    max: 90
    boot: 20
    safe_duty: 15
  - name: fan
    modbus: {bus: relays, unit: 1, register: 5, full: 255}
    max_rate: 1
scopes:
  - name: dimmer
    safe: {after: 6s}
`, url), true)
	duty := func(id, actuator string, token, seq uint64, d fence.Duty, want fence.Outcome) fence.Result {
		t.Helper()
		res := g.ctl.Send(t, fence.Command{ID: testenv.ID(t, id), Actuator: actuator, Fence: fence.Fence{Token: token, Seq: seq}, Setpoint: true, Duty: d, State: d.State()})
		if res.Outcome != want {
			t.Fatalf("%s duty %s at %d/%d: %s (%s %s); want %s\n%s", actuator, d, token, seq, res.Outcome, res.Reason, res.Error, want, g.p.output())
		}
		return res
	}
	reg := func(want uint16) {
		t.Helper()
		if got := mod.Register(3); got != want {
			t.Fatalf("the dimmer's register holds %d, want %d\n%s", got, want, g.p.output())
		}
	}
	waitFor := func(what string, ok func() bool) { t.Helper(); g.waitFor(t, what, ok) }

	reg(200) // boot: 20
	res := duty("d-1", "dimmer", 42, 0, 5000, fence.Applied)
	if res.Duty == nil || *res.Duty != 5000 || res.State != fence.StateOn || res.ActualDuty != nil {
		t.Fatalf("answer %+v; want duty 50, on", res)
	}
	reg(500)
	waitMetric(t, g.http, "fencegate_output_duty_percent", map[string]string{"actuator": "dimmer"}, 50)
	duty("d-1", "dimmer", 42, 0, 5000, fence.Duplicate)
	duty("d-old", "dimmer", 41, 7, 8000, fence.Stale)
	for _, d := range []fence.Duty{9500, 500} {
		if res := duty("d-range", "dimmer", 43, 0, d, fence.Rejected); res.Reason != fence.ReasonRange {
			t.Errorf("duty %s: reason %q (%s); want range", d, res.Reason, res.Error)
		}
	}
	// Bad input, as sent by a broken controller: a clear error, nothing moves.
	for _, p := range []string{`{"id":"bad-1","token":44,"duty":150}`, `{"id":"bad-2","token":44,"duty":"50"}`, `{"id":"bad-3","token":44,"duty":-5}`, `{"id":"bad-4","token":44,"duty":50,"state":"on"}`} {
		g.ctl.Publish(t, "dimmer", []byte(p), false)
		id := strings.SplitN(strings.TrimPrefix(p, `{"id":"`), `"`, 2)[0]
		if res := g.ctl.Result(t, id); res.Outcome != fence.Rejected || res.Reason != fence.ReasonInvalid || !strings.Contains(res.Error, "duty") {
			t.Errorf("%s: %+v; want rejected invalid, naming duty", p, res)
		}
	}
	reg(500)
	duty("d-2", "dimmer", 42, 1, 6000, fence.Applied) // the refusals moved no fence
	reg(600)

	// max_rate 1 %/s: the fan may not jump from its recorded 0.
	if res := duty("f-1", "fan", 1, 0, 5000, fence.Rejected); res.Reason != fence.ReasonRate {
		t.Fatalf("fan 0 → 50 at once: reason %q (%s); want rate", res.Reason, res.Error)
	}
	duty("f-2", "fan", 1, 1, 0, fence.Applied) // off is always reachable

	// Behind the gateway's back, then a power cut: each time the boot
	// rule decides, and boot: 20 says 20 % (boot: last would restore 60).
	mod.SetRegister(3, 123)
	waitFor("the register changed behind the gateway's back is set by the boot rule", func() bool { return mod.Register(3) == 200 })
	duty("d-3", "dimmer", 42, 2, 6000, fence.Applied)
	mod.PowerCut()
	waitFor("the API says the dimmer is down", func() bool { w := apiStatus(t, g.http)["dimmer"].Watched; return w != nil && w.Down != "" })
	if err := mod.PowerOn(); err != nil {
		t.Fatal(err)
	}
	waitFor("the dimmer reconciled after its power came back", func() bool { return mod.Register(3) == 200 })

	// No command for 6 s: the dead-man sets its safe set-point, 15 %.
	waitFor("the dead-man's safe set-point", func() bool { return mod.Register(3) == 150 })
	st := g.ctl.State(t, "dimmer", func(o fence.Output) bool { return o.Duty == 1500 })
	if st.State != fence.StateOn || !strings.Contains(st.Why, "dead-man") {
		t.Errorf("state message %+v", st)
	}
	duty("d-4", "dimmer", 45, 0, 7000, fence.Applied)
	reg(700)

	// A kill and a start: boot: 20 again, recorded.
	g.p.kill()
	p := startProc(t, nil, "run", "--config", g.cfg, "--log-level", "warn")
	g.ctl.WaitStatus(t, "online")
	waitAPI(t, g.http, p)
	g.p = p
	waitFor("the boot set-point after a restart", func() bool { return mod.Register(3) == 200 })
	if a := apiStatus(t, g.http)["dimmer"]; a.Fence != (fence.Fence{Token: 45}) {
		t.Errorf("fence after the restart %v; want 45/0", a.Fence)
	}
	duty("d-late", "dimmer", 44, 9, 3000, fence.Stale)
}
