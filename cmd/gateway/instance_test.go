package main

import (
	"fmt"
	"os"
	"os/exec"
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

// instanceConfig writes a gateway configuration with id gatewayID(t) and
// its own store in dir; clientID "" keeps the default client id.
func instanceConfig(t *testing.T, dir, broker, clientID string) string {
	t.Helper()
	path := filepath.Join(dir, "gateway.yaml")
	text := fmt.Sprintf("id: %s\nmqtt: {broker: %q, client_id: %q}\nstore: fence.db\nboard: sim\nhttp: \"\"\nactuators:\n  - {name: pump, pin: GPIO17}\n", gatewayID(t), broker, clientID)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// exitStatus waits up to d for p to end and returns its exit status (-1
// if it still runs).
func (p *proc) exitStatus(d time.Duration) int {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	default:
	}
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-t.C:
		return -1
	}
}

// TestSecondInstanceRefused: two gateway
// processes with the same gateway id and different stores must not take
// turns deciding commands. The second refuses commands and stops with exit
// status 78 (which systemd does not restart), saying plainly that another
// gateway uses the id; the first stops too if it saw the second's claim,
// or else keeps serving with its own store; a stale controller's command
// is applied by neither. With the same client id the two would also kick
// each other off the broker every second.
func TestSecondInstanceRefused(t *testing.T) {
	for bname, startBroker := range testenv.Brokers() {
		for name, clientIDs := range map[string][2]string{
			"same client id":       {"", ""},
			"different client ids": {"-a", "-b"},
		} {
			t.Run(bname+"/"+name, func(t *testing.T) { secondInstance(t, startBroker(t), clientIDs) })
		}
	}
}

func secondInstance(t *testing.T, broker string, clientIDs [2]string) {
	for i, id := range clientIDs {
		if id != "" {
			clientIDs[i] = gatewayID(t) + id
		}
	}
	{
		{
			dirA, dirB := t.TempDir(), t.TempDir()
			ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: gatewayID(t)})
			a := startProc(t, nil, "run", "--config", instanceConfig(t, dirA, broker, clientIDs[0]), "--init", "--log-level", "info")
			ctl.WaitStatus(t, wire.StatusOnline)
			if res := ctl.Send(t, fence.Command{ID: "b-1", Actuator: "pump", Fence: fence.Fence{Token: 42}, State: fence.StateOff}); res.Outcome != fence.Applied {
				t.Fatalf("B's command to A: %s %s", res.Outcome, res.Error)
			}

			// A second installation with the same id and a fresh store, on
			// which the paused controller's token 41 would pass.
			b := startProc(t, nil, "run", "--config", instanceConfig(t, dirB, broker, clientIDs[1]), "--init", "--log-level", "info")
			// Only the stale commands turn a pump on.
			pumpsOff := func(when string) {
				t.Helper()
				for who, dir := range map[string]string{"A": dirA, "B": dirB} {
					if m, _ := boards.ReadLatch(filepath.Join(dir, "fence.db.pins")); m["GPIO17"] {
						t.Fatalf("%s's pump is on %s: a stale command was driven\nA:\n%s\nB:\n%s", who, when, a.output(), b.output())
					}
				}
			}
			stale := 0
			send := func() (fence.Result, bool) {
				stale++
				c := fence.Command{ID: fmt.Sprint("a-", stale), Actuator: "pump", Fence: fence.Fence{Token: 41}, State: fence.StateOn}
				ctl.Publish(t, "pump", wire.EncodeCommand(c), false)
				res, ok := ctl.TryResult(c.ID, 200*time.Millisecond)
				if ok && res.Outcome == fence.Applied {
					t.Fatalf("the stale command %s was applied (fence %s): two processes served one gateway id\nA:\n%s\nB:\n%s", c.ID, res.Fence, a.output(), b.output())
				}
				// An answer can be lost while the two kick each other off
				// the broker; the pins cannot.
				pumpsOff("while the two met")
				return res, ok
			}
			// B must stop; A may stop too, if it saw B's claim. Until
			// then, a stale controller keeps trying.
			deadline := time.Now().Add(20 * time.Second)
			for b.exitStatus(0) < 0 || (a.exitStatus(0) < 0 && time.Now().Before(deadline.Add(-15*time.Second))) {
				if time.Now().After(deadline) {
					t.Fatalf("B still runs after 20s (A: %d)\nA:\n%s\nB:\n%s", a.exitStatus(0), a.output(), b.output())
				}
				send()
			}
			const says = `another gateway process serves gateway id`
			if code := b.exitStatus(0); code != exitConfig || !strings.Contains(b.output(), says) {
				t.Errorf("B exited %d, want %d (a configuration error, not restarted), saying that another gateway uses its id:\n%s", code, exitConfig, b.output())
			}
			// A stops too (it saw B's claim), or keeps serving with its own
			// store, where the stale command is stale.
			for until := time.Now().Add(15 * time.Second); ; {
				if code := a.exitStatus(0); code >= 0 {
					if code != exitConfig || !strings.Contains(a.output(), says) {
						t.Errorf("A exited %d, want %d saying why:\n%s", code, exitConfig, a.output())
					}
					break
				}
				if res, ok := send(); ok {
					if res.Outcome != fence.Stale {
						t.Errorf("A answered the stale command %q (%s), want stale\nA:\n%s", res.Outcome, res.Error, a.output())
					}
					break
				}
				if time.Now().After(until) {
					t.Fatalf("A neither stopped nor answered within 15s after B stopped\nA:\n%s", a.output())
				}
			}
			pumpsOff("at the end")
			t.Logf("%d stale commands sent while the two met; none applied", stale)
		}
	}
}

// TestRestartAfterKillUnreaped: a gateway killed with kill -9 whose parent
// does not reap it (as in a container without an init) stays a zombie,
// with the pid and start its claim on the broker names. A restart of the
// same gateway right after takes over and takes commands: it does not
// take the zombie for a running gateway and exit 78, which systemd would
// not restart.
func TestRestartAfterKillUnreaped(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	cfg := instanceConfig(t, t.TempDir(), broker, "")
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: gatewayID(t)})
	log, err := os.Create(filepath.Join(t.TempDir(), "first.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	first := exec.Command(binary, "run", "--config", cfg, "--init", "--log-level", "info")
	first.Stdout, first.Stderr = log, log
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer first.Wait() // reaped only when the test ends
	defer first.Process.Kill()
	ctl.WaitStatus(t, wire.StatusOnline)
	if res := ctl.Send(t, fence.Command{ID: testenv.ID(t, "first"), Actuator: "pump", Fence: fence.Fence{Token: 1}, State: fence.StateOn}); res.Outcome != fence.Applied {
		t.Fatalf("the first gateway answered %s %s", res.Outcome, res.Error)
	}
	first.Process.Signal(syscall.SIGKILL) // and not waited for
	for deadline := time.Now().Add(20 * time.Second); processState(first.Process.Pid) != "Z"; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the killed gateway is in state %q, not a zombie", processState(first.Process.Pid))
		}
	}
	second := startProc(t, nil, "run", "--config", cfg, "--log-level", "info")
	c := fence.Command{ID: testenv.ID(t, "second"), Actuator: "pump", Fence: fence.Fence{Token: 2}, State: fence.StateOff}
	ctl.Publish(t, "pump", wire.EncodeCommand(c), false)
	res, ok := ctl.TryResult(c.ID, 30*time.Second)
	if code := second.exitStatus(0); code >= 0 || !ok || res.Outcome != fence.Applied {
		t.Fatalf("the restarted gateway: exit status %d (-1: runs), answer %+v (%v); want it to take over from the zombie and apply the command:\n%s",
			code, res, ok, second.output())
	}
}
