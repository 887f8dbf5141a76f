package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// stoppedLine is what the gateway logs when its store refused a write and
// it stops for its supervisor (service.Run).
const stoppedLine = "fence store refused a write; stopping so that the supervisor restarts the gateway"

// waitExit waits up to d for p to exit and returns its exit code.
func waitExit(t *testing.T, p *proc, d time.Duration, what string) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("%s: the gateway did not exit within %v\n%s", what, d, p.output())
	}
	return p.cmd.ProcessState.ExitCode()
}

// waitOutputOrExit waits until p's log holds text or p has exited.
func waitOutputOrExit(t *testing.T, p *proc, text string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.output(), text) {
		select {
		case <-p.done:
			return
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 20 s, and the gateway runs on:\n%s", text, p.output())
		}
	}
}

// pumpHigh reads the pump's latch level (GPIO17).
func pumpHigh(t *testing.T, dir string) bool {
	t.Helper()
	latch, err := boards.ReadLatch(filepath.Join(dir, "fence.db.pins"))
	if err != nil {
		t.Fatal(err)
	}
	return latch["GPIO17"]
}

// TestStoreOnFullDisk: the store on a filesystem that fills up
// while the gateway runs. Every command is answered; one whose fence could
// not be recorded (or whose output could not be written) is answered
// failed and leaves the output as it was; the first failed commit stops
// the process (exit 1, for its supervisor), since whether a failed fsync
// left the data on disk cannot be known. A restart on the full disk is
// allowed to fail again; once space returns the gateway starts, has every
// fence it answered applied, reconciles the outputs to the record, and a
// controller's resend of each failed command is applied or duplicate.
func TestStoreOnFullDisk(t *testing.T) {
	dir := testenv.SmallFS(t, "1m")
	broker := testenv.EmbeddedBroker(t)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.Port(t))
	cfg := writeConfig(t, dir, broker, httpAddr)
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: gatewayID(t)})
	p := startProc(t, nil, "run", "--config", cfg, "--init", "--log-level", "warn")
	ctl.WaitStatus(t, "online")
	prefix := testenv.ID(t, "full")
	token := uint64(100)
	send := func(p *proc) (fence.Command, fence.Result, bool) {
		token++
		c := fence.Command{ID: fmt.Sprint(prefix, "-", token), Actuator: "pump", Fence: fence.Fence{Token: token}, State: fence.State(1 + token%2), Holder: strings.Repeat("h", 120)}
		ctl.Publish(t, "pump", wire.EncodeCommand(c), false)
		for {
			if res, ok := ctl.TryResult(c.ID, 200*time.Millisecond); ok {
				return c, res, true
			}
			select {
			case <-p.done:
				return c, fence.Result{}, false
			default:
			}
		}
	}
	var lastApplied uint64
	for range 5 {
		if c, res, ok := send(p); !ok || res.Outcome != fence.Applied {
			t.Fatalf("%s before the disk filled = %v %q\n%s", c.ID, res.Outcome, res.Error, p.output())
		}
		lastApplied = token
	}
	testenv.Fill(t, dir)

	var failed []fence.Command
	for i := 0; ; i++ {
		if i == 3000 {
			t.Fatalf("3000 commands on a full disk and the gateway neither stopped nor failed a commit:\n%s", p.output())
		}
		before := pumpHigh(t, dir)
		c, res, ok := send(p)
		if !ok {
			failed = append(failed, c) // never answered: the process stopped first; the broker redelivers it
			break
		}
		after := pumpHigh(t, dir)
		switch res.Outcome {
		case fence.Applied:
			lastApplied = c.Fence.Token
			if after != (c.State == fence.StateOn) {
				t.Fatalf("%s answered applied %v but the latch is high=%v", c.ID, c.State, after)
			}
		case fence.Failed:
			failed = append(failed, c)
			t.Logf("%s on the full disk: failed: %s", c.ID, res.Error)
			if after != before {
				t.Fatalf("%s answered failed (%s) but the output moved", c.ID, res.Error)
			}
		default:
			t.Fatalf("%s on a full disk = %v %q, want applied or failed", c.ID, res.Outcome, res.Error)
		}
	}
	if code := waitExit(t, p, 10*time.Second, "after a failed commit"); code != exitFailure || !strings.Contains(p.output(), stoppedLine) {
		t.Fatalf("gateway after a failed commit: exit %d, want %d with %q in the log:\n%s", code, exitFailure, stoppedLine, p.output())
	}
	t.Logf("%d commands failed on the full disk; the process stopped with: %s", len(failed), lastLine(p.output(), stoppedLine))

	// The supervisor restarts it while the disk is still full: it may
	// start or stop again, but it never answers applied without a record.
	p = startProc(t, nil, "run", "--config", cfg, "--log-level", "warn")
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
	}
	p.kill()

	os.Remove(filepath.Join(dir, "filler"))
	p = startProc(t, nil, "run", "--config", cfg, "--log-level", "warn")
	ctl.WaitStatus(t, "online")
	waitAPI(t, httpAddr, p)
	checkReconciled(t, httpAddr, "after space returned")
	if f := apiStatus(t, httpAddr)["pump"].Fence; f.Token < lastApplied {
		t.Fatalf("fence after space returned = %v, below %d, the last token answered applied", f, lastApplied)
	}
	for _, c := range failed {
		if res := ctl.Send(t, c); res.Outcome != fence.Applied && res.Outcome != fence.Duplicate && res.Outcome != fence.Stale {
			t.Errorf("resend of %s after space returned = %v %q, want applied, duplicate or (superseded) stale", c.ID, res.Outcome, res.Error)
		}
	}
	c, res, ok := send(p)
	if !ok || res.Outcome != fence.Applied || pumpHigh(t, dir) != (c.State == fence.StateOn) {
		t.Fatalf("a new command after space returned = %v %q (latch high=%v, want %v)", res.Outcome, res.Error, pumpHigh(t, dir), c.State)
	}
	checkReconciled(t, httpAddr, "after the new command")
}

// lastLine returns the last line of out that contains s.
func lastLine(out, s string) string {
	var last string
	for l := range strings.Lines(out) {
		if strings.Contains(l, s) {
			last = strings.TrimSpace(l)
		}
	}
	return last
}

// TestStoreRefusedAtStart: a store that cannot be trusted or
// written stops gateway run at start with exit 78 (a restart cannot fix
// it) and a message that says what is wrong and what to do; nothing is
// subscribed and no output is taken over.
func TestStoreRefusedAtStart(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, dir, store string) // damages the store (dir holds it)
		want   []string
	}{
		{"truncated", func(t *testing.T, dir, store string) {
			b, _ := os.ReadFile(store)
			os.WriteFile(store, b[:len(b)/2], 0o600)
		}, []string{"damaged", "truncated"}},
		{"empty", func(t *testing.T, dir, store string) { os.Truncate(store, 0) }, []string{"0 bytes", "truncated or never written"}},
		{"meta pages overwritten", func(t *testing.T, dir, store string) {
			f, _ := os.OpenFile(store, os.O_RDWR, 0)
			defer f.Close()
			f.WriteAt([]byte(strings.Repeat("garbage!", 1024)), 0)
			f.WriteAt([]byte(strings.Repeat("garbage!", 1024)), 4096)
		}, []string{"damaged"}},
		{"data pages overwritten", func(t *testing.T, dir, store string) {
			b, _ := os.ReadFile(store)
			f, _ := os.OpenFile(store, os.O_RDWR, 0)
			defer f.Close()
			f.WriteAt([]byte(strings.Repeat("\xff", len(b)-8192)), 8192)
		}, []string{"damaged"}},
		{"not a store", func(t *testing.T, dir, store string) {
			os.WriteFile(store, []byte(strings.Repeat("not a bbolt file\n", 1000)), 0o600)
		}, []string{"damaged"}},
		{"another gateway's", func(t *testing.T, dir, store string) {
			os.Remove(store)
			l, err := fencelog.Open(store, &fencelog.Options{Create: fencelog.Fresh(), Gateway: "other-gateway", AuditFlush: -1})
			if err != nil {
				t.Fatal(err)
			}
			l.Close()
		}, []string{"store of gateway \"other-gateway\"", "this configuration's id is"}},
		{"read-only filesystem", func(t *testing.T, dir, store string) {
			if out, err := exec.Command("mount", "-o", "remount,ro", dir).CombinedOutput(); err != nil {
				t.Fatalf("remount %s read-only: %v %s", dir, err, out)
			}
		}, []string{"read-only file system", "mount"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dir string
			if tt.name == "read-only filesystem" {
				dir = testenv.SmallFS(t, "1m")
			} else {
				dir = t.TempDir()
			}
			cfg := writeConfig(t, dir, "tcp://127.0.0.1:1", "")
			store := filepath.Join(dir, "fence.db")
			if out, code := runCLI(t, "init", "--config", cfg, "--new"); code != 0 {
				t.Fatalf("init: %d %s", code, out)
			}
			l, err := fencelog.Open(store, &fencelog.Options{AuditFlush: -1})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 200 {
				c := fence.Command{ID: fmt.Sprint("c", i), Actuator: "pump", Fence: fence.Fence{Token: uint64(i + 1)}, State: fence.StateOn, Holder: strings.Repeat("h", 100)}
				if _, err := l.Admit(fmt.Sprint("scope", i), c, fence.Rules{}, nil); err != nil {
					t.Fatal(err)
				}
			}
			l.Close()
			tt.damage(t, dir, store)
			for _, args := range [][]string{{"run", "--config", cfg}, {"check", "--config", cfg}} {
				out, code := runCLI(t, args...)
				if code != exitConfig {
					t.Errorf("gateway %s on a %s store: exit %d, want %d\n%s", args[0], tt.name, code, exitConfig, out)
				}
				for _, w := range tt.want {
					if !strings.Contains(out, w) {
						t.Errorf("gateway %s on a %s store: output lacks %q:\n%s", args[0], tt.name, w, out)
					}
				}
				if strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
					t.Errorf("gateway %s on a %s store crashed:\n%s", args[0], tt.name, out)
				}
			}
		})
	}
}

// TestTwoGatewaysOneStore: a second gateway process configured
// with the store a running gateway has open is refused at start and says
// why; the first one keeps answering.
func TestTwoGatewaysOneStore(t *testing.T) {
	dir := t.TempDir()
	broker := testenv.EmbeddedBroker(t)
	cfg := writeConfig(t, dir, broker, "")
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: gatewayID(t)})
	startProc(t, nil, "run", "--config", cfg, "--init", "--log-level", "warn")
	ctl.WaitStatus(t, "online")

	second := t.TempDir()
	text, _ := os.ReadFile(cfg)
	other := filepath.Join(second, "gateway.yaml")
	os.WriteFile(other, []byte(strings.Replace(strings.Replace(string(text), "store: fence.db", "store: "+filepath.Join(dir, "fence.db"), 1),
		"id: "+gatewayID(t), "id: "+gatewayID(t)+"-second", 1)), 0o644)
	for _, c := range []string{cfg, other} {
		out, code := runCLI(t, "run", "--config", c)
		if code == 0 || !strings.Contains(out, "locked by another process") || !strings.Contains(out, "one gateway at a time") {
			t.Errorf("a second gateway on the store (%s): exit %d, want a refusal saying the store is held:\n%s", c, code, out)
		}
	}
	if res := ctl.Send(t, fence.Command{ID: testenv.ID(t, "two"), Actuator: "pump", Fence: fence.Fence{Token: 7}, State: fence.StateOn}); res.Outcome != fence.Applied {
		t.Errorf("the first gateway after the refused second = %v %q, want applied", res.Outcome, res.Error)
	}
}

// TestStoreGoneWhileRunning: a store deleted (unlinked) or
// replaced by another file while the gateway runs would otherwise take
// every later commit into a file nobody can open again, and answer it
// applied. The next command is answered failed and not driven, and the
// process stops (exit 1) with a log line that says what happened; an idle
// gateway notices within a few seconds. A restart after a deletion stops
// with exit 78: the store is missing, and gateway init says how to create
// it.
func TestStoreGoneWhileRunning(t *testing.T) {
	for _, how := range []string{"deleted", "replaced", "deleted while idle"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			broker := testenv.EmbeddedBroker(t)
			cfg := writeConfig(t, dir, broker, "")
			store := filepath.Join(dir, "fence.db")
			ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: gatewayID(t)})
			p := startProc(t, nil, "run", "--config", cfg, "--init", "--log-level", "warn")
			ctl.WaitStatus(t, "online")
			id := testenv.ID(t, "gone")
			if res := ctl.Send(t, fence.Command{ID: id + "-1", Actuator: "pump", Fence: fence.Fence{Token: 10}, State: fence.StateOn}); res.Outcome != fence.Applied {
				t.Fatalf("first command = %v %q", res.Outcome, res.Error)
			}
			switch how {
			case "replaced":
				b, _ := os.ReadFile(store)
				os.WriteFile(store+".copy", b, 0o600)
				if err := os.Rename(store+".copy", store); err != nil {
					t.Fatal(err)
				}
			default:
				if err := os.Remove(store); err != nil {
					t.Fatal(err)
				}
			}
			word := strings.Fields(how)[0]
			if how != "deleted while idle" {
				res := ctl.Send(t, fence.Command{ID: id + "-2", Actuator: "pump", Fence: fence.Fence{Token: 11}, State: fence.StateOff})
				if res.Outcome != fence.Failed || !strings.Contains(res.Error, word) {
					t.Errorf("command after the store was %s = %v %q, want failed saying it was %s", how, res.Outcome, res.Error, word)
				}
				if !pumpHigh(t, dir) {
					t.Error("the output moved for a command whose store was gone")
				}
			}
			// The gateway logs that it stops, then stops: once the line
			// is there its exit must follow within a short grace.
			waitOutputOrExit(t, p, stoppedLine)
			code := waitExit(t, p, 3*time.Second, "store "+how+", after the log said it stops")
			if code != exitFailure || !strings.Contains(p.output(), stoppedLine) || !strings.Contains(p.output(), "was "+word) {
				t.Fatalf("gateway with its store %s: exit %d, want %d and a log line saying the store was %s:\n%s", how, code, exitFailure, word, p.output())
			}
			t.Logf("log: %s", lastLine(p.output(), stoppedLine))
			if how != "replaced" {
				out, code := runCLI(t, "run", "--config", cfg)
				if code != exitConfig || !strings.Contains(out, "store does not exist") || !strings.Contains(out, "gateway init") {
					t.Errorf("restart after the store was deleted: exit %d, want %d saying how to create it:\n%s", code, exitConfig, out)
				}
			}
		})
	}
}
