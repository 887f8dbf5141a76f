//go:build unix

package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// notifySocket is a service manager's notification socket, as systemd
// gives a Type=notify service in NOTIFY_SOCKET: it records each message
// with the time it came.
type notifySocket struct {
	path string
	mu   sync.Mutex
	msgs []notifyMsg
}

type notifyMsg struct {
	at   time.Time
	text string
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	dir, err := os.MkdirTemp("", "sd") // short: a socket's path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	n := &notifySocket{path: filepath.Join(dir, "notify")}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.msgs = append(n.msgs, notifyMsg{time.Now(), string(buf[:k])})
			n.mu.Unlock()
		}
	}()
	return n
}

// wait waits for a message containing text that came after since, and
// returns it.
func (n *notifySocket) wait(t *testing.T, since time.Time, text string) notifyMsg {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n.mu.Lock()
		for _, m := range n.msgs {
			if m.at.After(since) && strings.Contains(m.text, text) {
				n.mu.Unlock()
				return m
			}
		}
		n.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %q on NOTIFY_SOCKET within 20 s; got %v", text, n.texts())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pings returns the times of the WATCHDOG=1 messages between from and to.
func (n *notifySocket) pings(from, to time.Time) []time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []time.Time
	for _, m := range n.msgs {
		if m.text == "WATCHDOG=1" && m.at.After(from) && m.at.Before(to) {
			out = append(out, m.at)
		}
	}
	return out
}

func (n *notifySocket) texts() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, m := range n.msgs {
		out = append(out, m.text)
	}
	return out
}

// TestSystemdNotify: under a service manager the gateway says READY=1 once
// its outputs are reconciled and it takes commands, with a STATUS= that
// says so, pings the watchdog while its decision path moves, and stops the
// pings (logging why) while a scope is held without progress, or while a
// store commit does not return; it says STOPPING=1 when stopped.
func TestSystemdNotify(t *testing.T) {
	start := func(t *testing.T, watchdog time.Duration, env ...string) (*notifySocket, *proc, *testctl.Controller, string, string) {
		t.Helper()
		n := listenNotify(t)
		broker := testenv.EmbeddedBroker(t)
		id := gatewayID(t)
		httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		cfg := writeConfigWith(t, t.TempDir(), id, broker, httpAddr, "actuators:\n  - {name: pump, pin: GPIO17}\n")
		env = append(env, "NOTIFY_SOCKET="+n.path, fmt.Sprintf("WATCHDOG_USEC=%d", watchdog.Microseconds()))
		before := time.Now()
		p := startProc(t, env, "run", "--config", cfg, "--init", "--log-level", "info")
		ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: id})
		ready := n.wait(t, before, "READY=1")
		if !strings.Contains(ready.text, "STATUS=ready: connected to "+broker) {
			t.Errorf("READY=1 came with %q, want a STATUS= that says it takes commands from %s", ready.text, broker)
		}
		if !strings.Contains(p.output(), "outputs reconciled") {
			t.Errorf("READY=1 before the outputs were reconciled:\n%s", p.output())
		}
		ctl.WaitStatus(t, "online")
		return n, p, ctl, id, httpAddr
	}

	t.Run("status follows the broker", func(t *testing.T) {
		n := listenNotify(t)
		b := testenv.MosquittoVolatile(t)
		id := gatewayID(t)
		cfg := writeConfigWith(t, t.TempDir(), id, b.URL, "", "actuators:\n  - {name: pump, pin: GPIO17}\n")
		before := time.Now()
		startProc(t, []string{"NOTIFY_SOCKET=" + n.path}, "run", "--config", cfg, "--init", "--log-level", "warn")
		n.wait(t, before, "READY=1")
		stopped := time.Now()
		b.Stop(t, syscall.SIGTERM)
		n.wait(t, stopped, "STATUS=not ready: broker: not connected to "+b.URL)
		started := time.Now()
		b.Start(t)
		n.wait(t, started, "STATUS=ready: connected to "+b.URL)
	})

	t.Run("stuck scope", func(t *testing.T) {
		n, p, ctl, id, httpAddr := start(t, time.Second, "FENCEGATE_HANG_AFTER_COMMIT=2")
		n.wait(t, time.Now(), "WATCHDOG=1")
		n.wait(t, time.Now(), "WATCHDOG=1")
		if res := ctl.Send(t, fence.Command{ID: id + "-1", Actuator: "pump", Fence: fence.Fence{Token: 5}, State: fence.StateOn}); res.Outcome != fence.Applied {
			t.Fatalf("first command: %+v", res)
		}
		ctl.Publish(t, "pump", wire.EncodeCommand(fence.Command{ID: id + "-2", Actuator: "pump", Fence: fence.Fence{Token: 5, Seq: 1}, State: fence.StateOff}), false)
		// The second command hangs right after its commit: once the
		// scope's fence shows it, the stall limit (half the interval, 0.5
		// s) and a check (0.5 s) later the gateway says it stops the
		// pings, and from one check later none may come while the scope
		// hangs.
		waitMetric(t, httpAddr, "fencegate_scope_fence_seq", map[string]string{"scope": "pump"}, 1)
		waitOutputWithin(t, p, "scope pump has been held", 4*time.Second)
		stuck := time.Now()
		time.Sleep(2 * time.Second) // watching for pings that must not come
		if late := n.pings(stuck.Add(600*time.Millisecond), time.Now()); len(late) > 0 {
			t.Errorf("%d watchdog pings while the pump's scope hung, the last %v after the log said so", len(late), late[len(late)-1].Sub(stuck))
		}
		if !strings.Contains(p.output(), "decision path stuck") {
			t.Errorf("the log does not say why the pings stopped:\n%s", p.output())
		}
	})

	t.Run("stuck store", func(t *testing.T) {
		n, p, ctl, id, _ := start(t, 400*time.Millisecond, "FENCEGATE_COMMIT_DELAY=1s")
		n.wait(t, time.Now(), "WATCHDOG=1")
		sent := time.Now()
		if res := ctl.Send(t, fence.Command{ID: id + "-1", Actuator: "pump", Fence: fence.Fence{Token: 5}, State: fence.StateOn}); res.Outcome != fence.Applied {
			t.Fatalf("command: %+v", res)
		}
		answered := time.Now()
		// The commit takes a second and the limit is 0.2 s (pings every
		// 0.2 s otherwise): the gateway says it stopped the pings, and
		// between the command and its answer there is a gap of most of
		// the commit without one.
		if !strings.Contains(p.output(), "a commit of the fence store has run for") {
			t.Errorf("the log does not say why the pings stopped:\n%s", p.output())
		}
		pings := append(append([]time.Time{sent}, n.pings(sent, answered)...), answered)
		var gap time.Duration
		for i := 1; i < len(pings); i++ {
			gap = max(gap, pings[i].Sub(pings[i-1]))
		}
		if gap < 600*time.Millisecond {
			t.Errorf("pings at most %v apart during a commit of a second (%v from command to answer)", gap, answered.Sub(sent))
		}
		n.wait(t, answered, "WATCHDOG=1") // and again once it returned
		stop := time.Now()
		p.cmd.Process.Signal(syscall.SIGTERM)
		n.wait(t, stop, "STOPPING=1")
		<-p.done
	})
}
