//go:build linux

package guest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/modbusio/modbussim"
)

// TestModbusOnThePi: the gateway on the emulated Pi fences a relay of a
// Modbus TCP module (in the guest, on loopback) next to a GPIO line: a
// fenced on writes the coil, a stale off changes nothing, the module's
// power cut makes the command failed with its fence recorded, and when
// the power is back the watch drives the coil to the record.
func TestModbusOnThePi(t *testing.T) {
	guestOnly(t)
	c := bcmChip(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	mod, err := modbussim.Start(fmt.Sprintf("tcp://127.0.0.1:%d", port), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	broker := guestBroker(t)
	cfg, err := config.Parse(fmt.Appendf(nil, `id: pi-emu-modbus
mqtt:
  broker: %s
store: %s
board: raspberry-pi
http: "127.0.0.1:0"
modbus:
  - {name: relays, url: "tcp://127.0.0.1:%d", poll: 300ms, timeout: 500ms}
actuators:
  - {name: pump, pin: GPIO26, boot: "off"}
  - {name: lamp, modbus: {bus: relays, unit: 1, coil: 3}}
`, broker, filepath.Join(t.TempDir(), "fence.db"), port))
	if err != nil {
		t.Fatal(err)
	}
	runGateway(t, cfg, true)
	ctx := context.Background()
	cl, err := client.Dial(ctx, client.Options{Broker: broker, GatewayID: "pi-emu-modbus"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	send := func(act string, token uint64, s fence.State, want fence.Outcome) {
		t.Helper()
		n++
		res, _ := cl.Send(ctx, fence.Command{ID: fmt.Sprintf("%s-%d", act, n), Actuator: act, Fence: fence.Fence{Token: token}, State: s})
		if res.Outcome != want {
			t.Fatalf("%s %s at %d: %s (%s), want %s", act, s, token, res.Outcome, res.Error, want)
		}
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 20 s", what)
			}
		}
	}
	send("lamp", 5, fence.StateOn, fence.Applied)
	send("pump", 1, fence.StateOn, fence.Applied)
	if !mod.Coil(3) {
		t.Fatal("the lamp's coil is off after an applied on")
	}
	expectOutput(t, c, "GPIO26", true)
	send("lamp", 4, fence.StateOff, fence.Stale)
	if !mod.Coil(3) {
		t.Fatal("a stale off switched the coil")
	}
	mod.PowerCut()
	send("lamp", 6, fence.StateOff, fence.Failed)
	send("lamp", 5, fence.StateOn, fence.Stale) // the failed command's fence stands
	if err := mod.PowerOn(); err != nil {
		t.Fatal(err)
	}
	mod.SetCoil(3, true) // as it may come back: not as recorded (off at 6)
	waitFor("the coil driven to its record after the power came back", func() bool { return !mod.Coil(3) })
	expectOutput(t, c, "GPIO26", true) // the GPIO line untouched all along
}
