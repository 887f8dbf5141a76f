package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// waitLog waits up to d for p to log text.
func (p *proc) waitLog(t *testing.T, text string, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); !strings.Contains(p.output(), text); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) || p.exitStatus(0) >= 0 {
			t.Fatalf("the gateway did not log %q within %v:\n%s", text, d, p.output())
		}
	}
}

// sendApplied sends c through a new controller connection and fails t
// unless it is applied.
func sendApplied(t *testing.T, broker string, c fence.Command, p *proc) {
	t.Helper()
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: gatewayID(t)})
	if res := ctl.Send(t, c); res.Outcome != fence.Applied {
		t.Fatalf("%s: %s %s %s\n%s", c.ID, res.Outcome, res.Reason, res.Error, p.output())
	}
}

// TestRestartWithQueuedCommands: the gateway crashes while a controller
// keeps sending; its broker session keeps the commands. The restarted
// gateway takes commands again and answers every one that waited, however
// the broker numbers the messages it delivers (the embedded broker refuses
// a SUBSCRIBE whose packet id is that of a message it is delivering).
func TestRestartWithQueuedCommands(t *testing.T) {
	for bname, startBroker := range testenv.Brokers() {
		t.Run(bname, func(t *testing.T) {
			broker := startBroker(t)
			cfg := instanceConfig(t, t.TempDir(), broker, "")
			ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: gatewayID(t)})
			a := startProc(t, nil, "run", "--config", cfg, "--init", "--log-level", "info")
			ctl.WaitStatus(t, wire.StatusOnline)
			if res := ctl.Send(t, fence.Command{ID: "x-0", Actuator: "pump", Fence: fence.Fence{Token: 1}, State: fence.StateOff}); res.Outcome != fence.Applied {
				t.Fatalf("x-0: %s %s", res.Outcome, res.Error)
			}
			a.kill()
			const n = 30
			for i := 1; i <= n; i++ {
				ctl.Publish(t, "pump", wire.EncodeCommand(fence.Command{ID: fmt.Sprint("x-", i), Actuator: "pump",
					Fence: fence.Fence{Token: 1, Seq: uint64(i)}, State: fence.State(i%2 + 1)}), false)
			}
			b := startProc(t, nil, "run", "--config", cfg, "--log-level", "info")
			// The embedded broker resends a session's queued messages in
			// no particular order (mochi sorts them by the second they
			// were queued in): a command overtaken by a later one is
			// stale, never applied after it.
			applied := 0
			for i := 1; i <= n; i++ {
				res, ok := ctl.TryResult(fmt.Sprint("x-", i), 30*time.Second)
				switch {
				case !ok:
					t.Fatalf("x-%d, queued while the gateway was down, was not answered\n%s", i, b.output())
				case res.Outcome == fence.Applied:
					applied++
				case res.Outcome != fence.Stale || bname == "mosquitto":
					t.Fatalf("x-%d, queued while the gateway was down: %+v\n%s", i, res, b.output())
				}
			}
			last := ctl.State(t, "pump", func(o fence.Output) bool { return o.Fence == fence.Fence{Token: 1, Seq: n} })
			t.Logf("%d of %d applied; the pump ends %s at %s", applied, n, last.State, last.Fence)
		})
	}
}

// TestBrokerRollbackIsNoConflict: the gateway was restarted after the
// broker last saved its state, and then the broker crashes: it comes back
// with the retained claim of the gateway's previous process. That process
// has ended (the claim is of this host, and its pid is gone), so the
// gateway goes on serving instead of stopping for a conflict.
func TestBrokerRollbackIsNoConflict(t *testing.T) {
	m := testenv.MosquittoPersistent(t)
	cfg := instanceConfig(t, t.TempDir(), m.URL, "")
	p1 := startProc(t, nil, "run", "--config", cfg, "--init", "--log-level", "info")
	p1.waitLog(t, "gateway ready", 20*time.Second)
	p1.kill()
	m.Stop(t, syscall.SIGTERM) // saves p1's claim
	m.Start(t)
	p2 := startProc(t, nil, "run", "--config", cfg, "--log-level", "info")
	p2.waitLog(t, "taking over from the previous process, which has ended", 20*time.Second)
	p2.waitLog(t, "gateway ready", 20*time.Second)
	m.Stop(t, syscall.SIGKILL) // no save: the broker still has p1's claim
	m.Start(t)
	sendApplied(t, m.URL, fence.Command{ID: "after-rollback", Actuator: "pump", Fence: fence.Fence{Token: 5}, State: fence.StateOn}, p2)
	if code := p2.exitStatus(0); code >= 0 {
		t.Fatalf("the only gateway process exited %d after a broker rollback:\n%s", code, p2.output())
	}
}

// TestSettleSurvivesBrokerRestart: the id was last served from another
// host (the gateway was moved), so the gateway waits to make sure that
// process is gone; the broker restarts meanwhile. The connection the
// broker closes is no other process taking the session: the gateway goes
// on and serves.
func TestSettleSurvivesBrokerRestart(t *testing.T) {
	m := testenv.MosquittoPersistent(t)
	topics := wire.Topics{Prefix: wire.DefaultPrefix, GatewayID: gatewayID(t)}
	old := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(m.URL).SetClientID(testenv.ID(t, "old")))
	if tok := old.Connect(); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	claim := wire.Claim{Instance: "0ld", Store: "old-store", Host: "old-host", PID: 1, Started: time.Now().Add(-time.Hour).UTC().Truncate(time.Second), Connection: 1}
	if tok := old.Publish(topics.Instance(), 1, true, wire.EncodeClaim(claim)); tok.Wait() && tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	old.Disconnect(100)
	p := startProc(t, nil, "run", "--config", instanceConfig(t, t.TempDir(), m.URL, ""), "--init", "--log-level", "info")
	p.waitLog(t, "making sure it is gone", 20*time.Second)
	m.Stop(t, syscall.SIGTERM)
	m.Start(t)
	p.waitLog(t, "gateway ready", 30*time.Second)
	sendApplied(t, m.URL, fence.Command{ID: "after-restart", Actuator: "pump", Fence: fence.Fence{Token: 5}, State: fence.StateOn}, p)
	if code := p.exitStatus(0); code >= 0 {
		t.Fatalf("the only gateway process exited %d after a broker restart:\n%s", code, p.output())
	}
}
