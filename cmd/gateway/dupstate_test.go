package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// TestDuplicateAfterBootOff: a command committed just before a crash, to
// an actuator with boot: off. The restart drives the output off, and the
// broker's redelivery of the command is answered duplicate with the state
// the output has now, off, not the on it asked for; gateway send, resending
// it, does not report success (exit 7, a message that says why); a new
// command with a higher seq switches it on.
func TestDuplicateAfterBootOff(t *testing.T) {
	dir := t.TempDir()
	broker := testenv.EmbeddedBroker(t)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.Port(t))
	id := gatewayID(t)
	cfg := writeConfigWith(t, dir, id, broker, httpAddr, "actuators:\n  - {name: pump, pin: GPIO17, boot: \"off\"}\n")
	latch := filepath.Join(dir, "fence.db.pins")
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: id})

	p := startProc(t, []string{"FENCEGATE_CRASH_AFTER_COMMIT=1"}, "run", "--config", cfg, "--init")
	ctl.WaitStatus(t, "online")
	on := fence.Command{ID: testenv.ID(t, "on"), Actuator: "pump", Fence: fence.Fence{Token: 10}, State: fence.StateOn}
	ctl.Publish(t, "pump", wire.EncodeCommand(on), false)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("gateway did not crash at the failpoint:\n%s", p.output())
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("gateway exit = %v, want killed by SIGKILL after the commit", p.cmd.ProcessState)
	}
	if l, _ := boards.ReadLatch(latch); l["GPIO17"] {
		t.Fatal("pump latch high: the command was driven before the crash")
	}

	p = startProc(t, nil, "run", "--config", cfg)
	ctl.WaitStatus(t, "online")
	waitAPI(t, httpAddr, p)
	res := ctl.Result(t, on.ID)
	if res.Outcome != fence.Duplicate || res.Fence != on.Fence || res.State != fence.StateOff || res.Actual != "" {
		t.Errorf("redelivered command = %s at %v, state %q, actual %q; want duplicate at %v, state off (boot: off), no other actual state",
			res.Outcome, res.Fence, res.State, res.Actual, on.Fence)
	}
	if l, _ := boards.ReadLatch(latch); l["GPIO17"] {
		t.Error("pump latch high after the restart with boot: off")
	}
	if a := apiStatus(t, httpAddr)["pump"]; a.State != "off" || a.Level != "low" || a.Fence != on.Fence {
		t.Errorf("API pump = %+v, want off, level low, fence %v", a, on.Fence)
	}

	send := func(args ...string) (string, int) {
		return runCLI(t, append([]string{"send", "--broker", broker, "--gateway", id, "--actuator", "pump", "--timeout", "5s"}, args...)...)
	}
	out, code := send("--id", on.ID, "--token", "10", "on")
	for _, want := range []string{`"outcome":"duplicate"`, `"state":"off"`, "gateway: client: duplicate, but pump is off now, not on as asked", "higher seq"} {
		if !strings.Contains(out, want) {
			t.Errorf("gateway send of the same command: output lacks %q:\n%s", want, out)
		}
	}
	if code != exitOutput {
		t.Errorf("gateway send of the same command: exit %d, want %d (output not as asked)\n%s", code, exitOutput, out)
	}
	if out, code := send("--token", "10", "--seq", "1", "on"); code != 0 || !strings.Contains(out, `"outcome":"applied"`) {
		t.Errorf("gateway send with a higher seq: exit %d, want 0 and applied\n%s", code, out)
	}
	if l, _ := boards.ReadLatch(latch); !l["GPIO17"] {
		t.Error("pump latch low after the applied command with a higher seq")
	}
}
