package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// memory returns a process's resident set and its peak so far, in bytes
// (VmRSS and VmHWM of /proc/PID/status).
func memory(t *testing.T, pid int) (rss, peak uint64) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch {
		case err != nil:
		case k == "VmRSS":
			rss = kb << 10
		case k == "VmHWM":
			peak = kb << 10
		}
	}
	if rss == 0 || peak == 0 {
		t.Fatalf("no VmRSS or VmHWM in /proc/%d/status", pid)
	}
	return rss, peak
}

// oversizeGrowth bounds what a 64 MB command may add to the gateway's peak
// resident memory.
const oversizeGrowth = 16 << 20

// TestOversizedCommand: a 64 MB command raised the gateway's
// resident memory from 20 to 152 MB (its MQTT client read it whole, and
// the decoder went over all of it before its size check); under a memory
// limit the gateway was killed before it acknowledged the command, which
// the broker then delivered again at every restart. Through a Mosquitto
// that forwards any size (no max_packet_size), the command must be
// answered rejected (invalid, saying its size), cost the gateway no more
// than oversizeGrowth, change no fence and move no pin, and be
// acknowledged: after a clean stop and a start, Mosquitto delivers what it
// kept for the gateway before a new command, and it must not be among it.
func TestOversizedCommand(t *testing.T) {
	testenv.Need(t, runtime.GOOS == "linux", "the resident memory is read from /proc")
	broker := testenv.Mosquitto(t)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.Port(t))
	cfg := writeConfig(t, t.TempDir(), broker, httpAddr)
	p := startProc(t, nil, "run", "--config", cfg, "--init", "--log-level", "info")
	p.waitLog(t, "gateway ready", 20*time.Second)
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: gatewayID(t)})
	if res := ctl.Send(t, fence.Command{ID: "small-1", Actuator: "pump", Fence: fence.Fence{Token: 5}, State: fence.StateOn}); res.Outcome != fence.Applied {
		t.Fatalf("small-1: %s %s\n%s", res.Outcome, res.Error, p.output())
	}
	before := apiStatus(t, httpAddr)["pump"]
	rss, peak := memory(t, p.cmd.Process.Pid)

	const size = 64 << 20
	head := `{"id":"huge-1","token":6,"state":"off","holder":"`
	payload := []byte(head + strings.Repeat("x", size-len(head)-2) + `"}`)
	// 64 MB through the broker and into the gateway's discard takes
	// seconds on a busy machine: a minute for its acknowledgement, as for
	// its answer.
	pctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := ctl.PublishRaw(pctx, "pump", payload, false)
	cancel()
	if err != nil {
		t.Fatalf("publish a 64 MB command: %v\n%s", err, p.output())
	}
	payload = nil
	res, ok := ctl.TryResult("huge-1", time.Minute)
	if !ok {
		t.Fatalf("no answer to a 64 MB command within a minute\n%s", p.output())
	}
	_, peakAfter := memory(t, p.cmd.Process.Pid)
	t.Logf("gateway memory: %d MB resident, %d MB at most before a 64 MB command; at most %d MB after it (bound: +%d MB)",
		rss>>20, peak>>20, peakAfter>>20, oversizeGrowth>>20)
	want := fmt.Sprintf("payload is %d bytes; the limit is %d", size, wire.MaxPayload)
	if res.Outcome != fence.Rejected || res.Reason != fence.ReasonInvalid || res.Error != want {
		t.Errorf("64 MB command: %s (%s) %q, want rejected (%s) %q", res.Outcome, res.Reason, res.Error, fence.ReasonInvalid, want)
	}
	if peakAfter > peak+oversizeGrowth {
		t.Errorf("a 64 MB command raised the gateway's peak resident memory from %d to %d MB, want at most +%d MB",
			peak>>20, peakAfter>>20, oversizeGrowth>>20)
	}
	after := apiStatus(t, httpAddr)["pump"]
	if after.Fence != before.Fence || after.State != before.State || *after.Drives != *before.Drives {
		t.Errorf("the 64 MB command changed the pump: fence %s → %s, state %s → %s, drives %d → %d",
			before.Fence, after.Fence, before.State, after.State, *before.Drives, *after.Drives)
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exitStatus(20 * time.Second); code != 0 {
		t.Fatalf("the gateway exited %d on SIGTERM\n%s", code, p.output())
	}
	p = startProc(t, nil, "run", "--config", cfg, "--log-level", "info")
	p.waitLog(t, "gateway ready", 20*time.Second)
	if res := ctl.Send(t, fence.Command{ID: "small-2", Actuator: "pump", Fence: fence.Fence{Token: 7}, State: fence.StateOff}); res.Outcome != fence.Applied {
		t.Fatalf("small-2: %s %s\n%s", res.Outcome, res.Error, p.output())
	}
	if again, ok := ctl.TryResult("huge-1", time.Millisecond); ok {
		t.Errorf("the 64 MB command was delivered again after a restart (answered %s): it had not been acknowledged", again.Outcome)
	}
}
