package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/modbusio/modbussim"
	"github.com/fencegate/fencegate/sim"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// TestModbusTCPEndToEnd: a gateway process fences the outputs of a Modbus
// TCP relay module (in the test's process, over loopback) as it fences a
// GPIO line: a fenced command switches the coil, a stale one is refused
// and changes nothing; a coil switched behind the gateway's back is
// found and driven back; a power cut of the module makes its outputs
// down (readyz, metrics, the API), a command then is failed with its fence
// recorded, and when the power is back the boot rule reconciles them; a
// restart with the module off starts anyway and reconciles it later.
func TestModbusTCPEndToEnd(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	mod, url := tcpModule(t)
	g := startGateway(t, broker, fmt.Sprintf(`modbus:
  - {name: relays, url: %q, poll: 200ms, timeout: 300ms}
actuators:
  - {name: pump, pin: GPIO17}
  - name: fan
    modbus: {bus: relays, unit: 1, coil: 2}
  - name: valve
    boot: off
    modbus: {bus: relays, unit: 1, register: 4, on_value: 256, off_value: 512}
`, url), true)
	send := func(id, actuator string, token, seq uint64, s fence.State, want fence.Outcome) fence.Result {
		t.Helper()
		return g.expect(t, id, actuator, token, seq, s, want)
	}
	waitFor := func(what string, ok func() bool) { t.Helper(); g.waitFor(t, what, ok) }
	watched := func(name string) httpapi.Watched {
		t.Helper()
		a := apiStatus(t, g.http)[name]
		if a.Watched == nil {
			t.Fatalf("API %s: no watched health: %+v", name, a)
		}
		return *a.Watched
	}

	// Fenced, recorded, written, read back.
	if mod.Coil(2) || mod.Register(4) != 512 {
		t.Fatalf("at start: fan coil %v, valve register %d; want off (never commanded), 512 (boot: off)", mod.Coil(2), mod.Register(4))
	}
	if res := send("fan-on", "fan", 42, 0, fence.StateOn, fence.Applied); res.Actual != "" {
		t.Fatalf("applied on, actual %q: the coil reads back otherwise", res.Actual)
	}
	if !mod.Coil(2) {
		t.Fatal("fan's coil is off after an applied on")
	}
	writes := mod.Writes()
	send("fan-stale", "fan", 41, 9, fence.StateOff, fence.Stale)
	send("valve-on", "valve", 7, 0, fence.StateOn, fence.Applied)
	if !mod.Coil(2) || mod.Register(4) != 256 || mod.Writes() != writes+1 {
		t.Fatalf("after a stale off and the valve's on: coil %v, register %d, %d writes; want on, 256, one write", mod.Coil(2), mod.Register(4), mod.Writes()-writes)
	}

	// A button on the module switches the fan off: found, reported, and
	// driven back to the record (boot: last).
	mod.SetCoil(2, false)
	waitFor("the coil switched behind the gateway's back is driven back on", func() bool { return mod.Coil(2) })
	waitFor("the API counts the out-of-band change", func() bool { return watched("fan").OutOfBand == 1 })
	waitMetric(t, g.http, "fencegate_output_out_of_band_total", map[string]string{"actuator": "fan"}, 1)

	// The module loses its power.
	mod.PowerCut()
	waitFor("the API says the fan is down", func() bool { return watched("fan").Down != "" })
	waitMetric(t, g.http, "fencegate_output_down", map[string]string{"actuator": "fan"}, 1)
	code, rd := readyz(t, g.http)
	if code != http.StatusServiceUnavailable || !strings.Contains(rd.String(), "fan (") || !strings.Contains(rd.String(), "valve (") {
		t.Fatalf("GET /readyz with the module off = %d %q; want 503 naming fan and valve", code, rd.String())
	}
	res := send("fan-down", "fan", 43, 0, fence.StateOn, fence.Failed)
	if !strings.Contains(res.Error, "recorded") {
		t.Fatalf("failed answer %q; want that the fence was recorded", res.Error)
	}
	send("fan-behind", "fan", 42, 5, fence.StateOff, fence.Stale) // the fence of the failed command stands

	// Back, with its coils cleared: the fan to its record, the valve
	// off (boot: off, recorded so).
	if err := mod.PowerOn(); err != nil {
		t.Fatal(err)
	}
	waitFor("the module reconciled after its power came back", func() bool { return mod.Coil(2) && mod.Register(4) == 512 })
	waitFor("readyz ready again", func() bool { code, _ := readyz(t, g.http); return code == http.StatusOK })
	a := apiStatus(t, g.http)
	if a["fan"].State != "on" || a["fan"].Fence != (fence.Fence{Token: 43}) || a["valve"].State != "off" || a["valve"].Fence != (fence.Fence{Token: 7}) {
		t.Fatalf("API after the power came back: fan %s at %v, valve %s at %v; want on at 43/0, off at 7/0 (why: %q)",
			a["fan"].State, a["fan"].Fence, a["valve"].State, a["valve"].Fence, a["valve"].Why)
	}

	// A restart with the module off: the gateway starts, the module's
	// outputs down; when it comes back they are reconciled.
	g.p.kill()
	mod.PowerCut()
	p := startProc(t, nil, "run", "--config", g.cfg, "--log-level", "warn")
	g.ctl.WaitStatus(t, "online")
	waitAPI(t, g.http, p)
	g.p = p
	if w := watched("fan"); w.Down == "" {
		t.Fatalf("fan after a start with the module off: %+v; want down", w)
	}
	send("fan-off", "fan", 44, 0, fence.StateOff, fence.Failed)
	if err := mod.PowerOn(); err != nil {
		t.Fatal(err)
	}
	mod.SetCoil(2, true) // as it might have come back
	waitFor("the module reconciled after the restart", func() bool { return !mod.Coil(2) && mod.Register(4) == 512 && watched("fan").Down == "" })
	send("pump-on", "pump", 1, 0, fence.StateOn, fence.Applied)
}

// tcpModule starts a Modbus TCP module (unit 1) on a loopback port of the
// test's, closed when the test ends, and returns it and its URL.
func tcpModule(t *testing.T) (*modbussim.Module, string) {
	t.Helper()
	url := fmt.Sprintf("tcp://127.0.0.1:%d", testenv.Port(t))
	mod, err := modbussim.Start(url, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close() })
	return mod, url
}

// readyz reads GET /readyz.
func readyz(t *testing.T, addr string) (int, httpapi.Readiness) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rd httpapi.Readiness
	if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	return resp.StatusCode, rd
}

// TestSimModbusModule: the simulator's lamp is a relay of its Modbus TCP
// module, fenced like every output; the dashboard's hands on the module
// (its power, its own button) are seen by the gateway and reconciled.
func TestSimModbusModule(t *testing.T) {
	dash, broker := runningSim(t)
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: "sim"})
	info := func() sim.Info {
		var i sim.Info
		getJSON(t, dash+"/api/sim", &i)
		return i
	}
	post := func(path, body string) {
		t.Helper()
		resp, err := http.Post(dash+"/api/sim/modbus/"+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("POST /api/sim/modbus/%s: %s", path, resp.Status)
		}
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 20s (module %+v)", what, info().Modbus)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	lamp := func() httpapi.Actuator {
		for _, a := range testctl.Actuators(t, strings.TrimPrefix(dash, "http://")) {
			if a.Name == "lamp" {
				return a
			}
		}
		t.Fatal("no lamp on the dashboard's API")
		return httpapi.Actuator{}
	}
	if m := info().Modbus; !m.Powered || m.Coils["lamp"] {
		t.Fatalf("module at start: %+v; want powered, lamp off", m)
	}
	if a := lamp(); a.Watched == nil || !strings.HasPrefix(a.Pin, "modbus/relays/1/coil/0") {
		t.Fatalf("lamp in the API: pin %q, watched %+v; want the module's coil 0, watched", a.Pin, a.Watched)
	}
	res := ctl.Send(t, fence.Command{ID: testenv.ID(t, "lamp-on"), Holder: "ctl-a", Actuator: "lamp", Fence: fence.Fence{Token: 3}, State: fence.StateOn})
	if res.Outcome != fence.Applied || !info().Modbus.Coils["lamp"] {
		t.Fatalf("lamp on: %s (%s), coil %v; want applied, on", res.Outcome, res.Error, info().Modbus.Coils["lamp"])
	}
	post("button/lamp", "{}")
	waitFor("the lamp switched by the module's button is driven back on", func() bool {
		return info().Modbus.Coils["lamp"] && lamp().Watched.OutOfBand == 1
	})
	post("power", `{"on":false}`)
	waitFor("the lamp is down with the module's power cut", func() bool { return lamp().Watched.Down != "" })
	post("power", `{"on":true}`)
	waitFor("the lamp is reconciled when the power is back", func() bool { return info().Modbus.Coils["lamp"] && lamp().Watched.Down == "" })
}

// expect sends a command as holder "ctl-"+id and fails t unless it is
// answered want.
func (g testGateway) expect(t *testing.T, id, actuator string, token, seq uint64, s fence.State, want fence.Outcome) fence.Result {
	t.Helper()
	res := g.ctl.Send(t, fence.Command{ID: testenv.ID(t, id), Holder: "ctl-" + id, Actuator: actuator, Fence: fence.Fence{Token: token, Seq: seq}, State: s})
	if res.Outcome != want {
		t.Fatalf("%s %s at %d/%d: %s (%s); want %s\n%s", actuator, s, token, seq, res.Outcome, res.Error, want, g.p.output())
	}
	return res
}

// waitFor waits up to 20 s until ok, or fails t with the gateway's log.
func (g testGateway) waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s\n%s", what, g.p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
