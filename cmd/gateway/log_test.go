package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// TestLogJSONAndFloods: with --log-format json every line of the log is a
// JSON object; an applied command has a line of its own, and a flood of
// stale commands from one holder is one line in full and one line with
// the count (at the stop, or each minute), not a line each.
func TestLogJSONAndFloods(t *testing.T) {
	g := startGateway(t, testenv.EmbeddedBroker(t), "actuators:\n  - {name: pump, pin: GPIO17}\n", false, "--log-format", "json")
	id, cfg, p, ctl := g.id, g.cfg, g.p, g.ctl
	if res := ctl.Send(t, fence.Command{ID: id + "-b", Actuator: "pump", Holder: "ctl-b", Fence: fence.Fence{Token: 42}, State: fence.StateOn}); res.Outcome != fence.Applied {
		t.Fatalf("applied: %+v", res)
	}
	const flood = 100
	for i := range flood {
		ctl.Publish(t, "pump", wire.EncodeCommand(fence.Command{ID: fmt.Sprint(id, "-a-", i), Actuator: "pump", Holder: "ctl-a",
			Fence: fence.Fence{Token: 41, Seq: uint64(i)}, State: fence.StateOff}), false)
	}
	if res := ctl.Result(t, fmt.Sprint(id, "-a-", flood-1)); res.Outcome != fence.Stale {
		t.Fatalf("the flood's last: %+v", res)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done

	count := map[string]int{}
	var summary map[string]any
	for _, l := range strings.Split(strings.TrimSpace(p.output()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("a log line that is not JSON: %q", l)
		}
		msg, _ := rec["msg"].(string)
		count[msg]++
		if msg == "stale commands" {
			summary = rec
		}
	}
	if count["applied"] != 1 || count["stale"] != 1 || count["stale commands"] != 1 {
		t.Errorf("%d applied, %d stale and %d stale-commands lines; want one each:\n%s", count["applied"], count["stale"], count["stale commands"], p.output())
	}
	if summary["holder"] != "ctl-a" || summary["count"] != float64(flood-1) {
		t.Errorf("the flood's summary: %v; want %d more stale commands of ctl-a", summary, flood-1)
	}
	if out, code := runCLI(t, "run", "--config", cfg, "--log-format", "yaml"); code != exitUsage || !strings.Contains(out, `--log-format "yaml": want text or json`) {
		t.Errorf("--log-format yaml: exit %d, %q", code, out)
	}
}
