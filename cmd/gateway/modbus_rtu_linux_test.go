package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestModbusRTUEndToEnd: a gateway process fences a Modbus RTU relay
// module (pymodbus, another process) on a serial line of two
// pseudo-terminals: a fenced command writes the coil, a stale one writes
// nothing; a coil switched on the module is driven back; an answer
// spoiled on the line (a CRC error) is answered failed, its fence
// recorded, and the watch finds the output as recorded; the module's
// power cut makes its outputs down, and when it is back they are written
// as the boot rule says (the fan's record; the heater's boot: off).
func TestModbusRTUEndToEnd(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	line := testenv.NewRTULine(t)
	mod := testenv.StartRTUModule(t, line.Module)
	g := startGateway(t, broker, fmt.Sprintf(`modbus:
  - {name: rs485, url: "rtu://%s", baud: 9600, poll: 200ms, timeout: 300ms}
actuators:
  - {name: fan, modbus: {bus: rs485, unit: 1, coil: 3}}
  - {name: heater, boot: "off", modbus: {bus: rs485, unit: 1, register: 2, on_value: 256, off_value: 512}}
`, line.Gateway), true)
	send := func(id, actuator string, token, seq uint64, s fence.State, want fence.Outcome) fence.Result {
		t.Helper()
		return g.expect(t, id, actuator, token, seq, s, want)
	}
	waitFor := func(what string, ok func() bool) { t.Helper(); g.waitFor(t, what, ok) }
	down := func(name string) string { return apiStatus(t, g.http)[name].Watched.Down }

	mod.Wrote(t, "register 2 512") // boot: off, at start
	send("fan-on", "fan", 42, 0, fence.StateOn, fence.Applied)
	mod.Wrote(t, "coil 3 1")
	send("fan-stale", "fan", 41, 7, fence.StateOff, fence.Stale)

	// Switched on the module: found, and driven back.
	mod.Set(t, "coil", 3, 0)
	mod.Wrote(t, "coil 3 0")
	mod.Wrote(t, "coil 3 1")

	// A CRC error in the answer to a write that reached the module (the
	// heater's register: the fan's coil, just driven back, may still be
	// read back meanwhile).
	line.Set(testenv.RTUCorruptRegisterWrite)
	res := send("heater-on", "heater", 7, 0, fence.StateOn, fence.Failed)
	if !strings.Contains(res.Error, "recorded") || !strings.Contains(res.Error, "crc") {
		t.Fatalf("failed answer %q; want the CRC error and that the fence was recorded", res.Error)
	}
	mod.Wrote(t, "register 2 256")
	waitFor("the heater is up once read back as recorded", func() bool { return down("heater") == "" })
	send("heater-behind", "heater", 6, 9, fence.StateOff, fence.Stale)

	// The module's power cut, and back with its outputs off.
	mod.PowerCut()
	waitFor("the fan is down with the module off", func() bool { return down("fan") != "" })
	send("fan-down", "fan", 43, 0, fence.StateOn, fence.Failed)
	mod = testenv.StartRTUModule(t, line.Module)
	mod.Wrote(t, "coil 3 1")       // boot: last, the record: on
	mod.Wrote(t, "register 2 512") // boot: off
	waitFor("the module's outputs up again", func() bool { return down("fan") == "" && down("heater") == "" })
	a := apiStatus(t, g.http)
	if a["fan"].State != "on" || a["fan"].Fence != (fence.Fence{Token: 43}) || a["heater"].State != "off" || a["heater"].Fence != (fence.Fence{Token: 7}) {
		t.Fatalf("after the power cut: fan %s at %v, heater %s at %v; want on at 43/0 and off (boot: off) at 7/0",
			a["fan"].State, a["fan"].Fence, a["heater"].State, a["heater"].Fence)
	}
}
