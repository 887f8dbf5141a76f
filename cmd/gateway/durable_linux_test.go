package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

// The system calls the durability checks watch: the store's opens, writes
// and syncs, the sim board's latch (a temporary file renamed over the
// latch, or a write in place to that file: the rename or the write is the
// moment the output moves), and the broker
// socket's reads and writes, which mark when a command arrived and when it
// was answered.
var durableCalls = []string{"openat", "close", "pwrite64", "write", "read", "fdatasync", "fsync", "rename", "renameat", "renameat2"}

// TestFsyncBeforeDrive proves from outside the process that the
// fence is on disk before the output moves: a real gateway process on the
// sim board runs under strace while a controller sends it commands one at
// a time. For every command answered applied, between the read that
// brought it and the write that answered it, the rename that moved the
// latch must come after a write to the store and after a completed
// fdatasync or fsync of the store's file that followed the store's last
// write. A gateway that drives before it records, or whose store does not
// sync (bbolt's NoSync), fails. It also counts the syncs per applied and
// per stale command (docs/design.md: about two per applied command, bbolt
// writes its pages and then its meta page; stale ones almost none).
func TestFsyncBeforeDrive(t *testing.T) {
	straceBin := needStrace(t)
	dir := t.TempDir()
	broker := testenv.EmbeddedBroker(t)
	cfg := writeConfig(t, dir, broker, "")
	store := filepath.Join(dir, "fence.db")
	trace := filepath.Join(dir, "trace")
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: gatewayID(t)})
	p := startProgram(t, nil, straceBin, straceCmd(t, trace, durableCalls, "run", "--config", cfg, "--init", "--log-level", "warn")...)
	ctl.WaitStatus(t, "online")

	const applied, stale = 40, 300
	prefix := testenv.ID(t, "fs")
	id := func(kind string, i int) string { return fmt.Sprintf("%s-%s-%d", prefix, kind, i) }
	for i := range applied {
		c := fence.Command{ID: id("a", i), Actuator: "pump", Fence: fence.Fence{Token: uint64(10 + i)}, State: fence.State(1 + i%2)}
		if res := ctl.Send(t, c); res.Outcome != fence.Applied {
			t.Fatalf("%s = %v (%s), want applied\n%s", c.ID, res.Outcome, res.Error, p.output())
		}
	}
	for i := range stale {
		c := fence.Command{ID: id("s", i), Actuator: "pump", Fence: fence.Fence{Token: 5}, State: fence.StateOn}
		if res := ctl.Send(t, c); res.Outcome != fence.Stale {
			t.Fatalf("%s = %v (%s), want stale\n%s", c.ID, res.Outcome, res.Error, p.output())
		}
	}
	stopTraced(t, p)

	evs := parseStrace(t, trace)
	ft := fileTracker{}
	isStore := func(fd int) bool { return ft[fd] == store }
	type window struct{ start, end int }
	windows := map[string]*window{}
	var storeWrites, storeSyncs, latchMoves []int // event positions
	for _, e := range evs {
		ft.see(e)
		switch {
		case e.name == "pwrite64" && e.entry && isStore(e.fd()), e.name == "write" && e.entry && isStore(e.fd()):
			storeWrites = append(storeWrites, e.n)
		case isSync(e) && isStore(e.fd()):
			storeSyncs = append(storeSyncs, e.n)
		case strings.HasPrefix(e.name, "rename") && e.entry && strings.Contains(e.args, "fence.db.pins\""),
			e.name == "pwrite64" && e.entry && strings.HasPrefix(ft[e.fd()], store+".pins"):
			latchMoves = append(latchMoves, e.n)
		case e.name == "read" && e.ok() || e.name == "write" && e.entry:
			k := strings.Index(e.args, `\"id\":\"`+prefix+"-")
			if k < 0 {
				break
			}
			rest := e.args[k+len(`\"id\":\"`):]
			cid, _, _ := strings.Cut(rest, `\"`)
			w := windows[cid]
			if w == nil {
				w = &window{start: -1, end: -1}
				windows[cid] = w
			}
			if e.name == "read" && w.start < 0 {
				w.start = e.n
			}
			if e.name == "write" && (strings.Contains(e.args, "/result") || strings.Contains(e.args, "/reply/")) && w.end < 0 { // the answer's publish
				w.end = e.n
			}
		}
	}
	if len(storeWrites) == 0 {
		t.Fatalf("the trace shows no write to the store %s: the store was not found in the trace\n%s", store, describe(evs, 0, 200))
	}
	in := func(list []int, from, to int) []int { // positions in (from, to)
		var out []int
		for _, n := range list {
			if n > from && n < to {
				out = append(out, n)
			}
		}
		return out
	}
	var appliedSyncs int
	for i := range applied {
		cid := id("a", i)
		w := windows[cid]
		if w == nil || w.start < 0 || w.end < w.start {
			t.Fatalf("command %s: its arrival and answer are not in the trace (window %+v)", cid, w)
		}
		moves := in(latchMoves, w.start, w.end)
		if len(moves) == 0 {
			t.Fatalf("command %s was answered applied, but the latch did not move between its arrival and its answer:\n%s", cid, describe(evs, w.start, w.end+1))
		}
		drive := moves[0]
		writes := in(storeWrites, w.start, drive)
		if len(writes) == 0 {
			t.Fatalf("command %s: the latch moved before anything was written to the store (drive before record):\n%s", cid, describe(evs, w.start, w.end+1))
		}
		if synced := in(storeSyncs, writes[len(writes)-1], drive); len(synced) == 0 {
			t.Fatalf("command %s: the latch moved after a write to the store that no completed fdatasync/fsync of the store followed (not durable when driven):\n%s",
				cid, describe(evs, w.start, w.end+1))
		}
		appliedSyncs += len(in(storeSyncs, w.start, w.end))
	}
	staleFrom := windows[id("s", 0)].start
	staleSyncs := len(in(storeSyncs, staleFrom, len(evs)))
	t.Logf("store syncs (fdatasync+fsync): %.2f per applied command (%d over %d); %.4f per stale command (%d over %d, the audit's background flush and the flush at stop included)",
		float64(appliedSyncs)/applied, appliedSyncs, applied, float64(staleSyncs)/stale, staleSyncs, stale)
	if appliedSyncs < applied {
		t.Errorf("%d syncs for %d applied commands: want at least one each", appliedSyncs, applied)
	}
	if staleSyncs > stale/20 {
		t.Errorf("%d syncs for %d stale commands: a stale decision must cost no sync of its own", staleSyncs, stale)
	}
}

// stopTraced stops the gateway that strace (p) runs with SIGTERM, as a
// supervisor would, and waits until strace has written the whole trace.
func stopTraced(t *testing.T, p *proc) {
	t.Helper()
	pid := p.cmd.Process.Pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		t.Fatalf("find the gateway under strace: %v", err)
	}
	kids := strings.Fields(string(b))
	if len(kids) != 1 {
		t.Fatalf("strace (pid %d) has children %q, want the gateway alone\n%s", pid, kids, p.output())
	}
	child, _ := strconv.Atoi(kids[0])
	if err := syscall.Kill(child, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the gateway under strace did not stop within 30s of SIGTERM\n%s", p.output())
	}
	if !p.cmd.ProcessState.Success() {
		t.Fatalf("strace/gateway exit %v\n%s", p.cmd.ProcessState, p.output())
	}
}

// TestStoreCreationSyncsDirectory proves from outside the
// process that a new store's name is durable, not only its contents: under
// strace, gateway init and run --init create a store in directories that
// do not exist yet, and each must fsync the store's directory after the
// store's file was created, and the parent of each directory it made after
// making it. Without that, a power cut soon after init can leave a store
// that was written and fsynced but has no name, and the next start finds
// no store.
func TestStoreCreationSyncsDirectory(t *testing.T) {
	straceBin := needStrace(t)
	for _, how := range [][]string{{"init", "--new"}, {"run", "--init"}} {
		t.Run(how[0], func(t *testing.T) {
			dir := t.TempDir()
			cfg := writeConfig(t, dir, "tcp://127.0.0.1:1", "")
			text, _ := os.ReadFile(cfg)
			os.WriteFile(cfg, []byte(strings.Replace(string(text), "store: fence.db", "store: state/sub/fence.db", 1)), 0o644)
			store := filepath.Join(dir, "state", "sub", "fence.db")
			trace := filepath.Join(dir, "trace")
			calls := []string{"openat", "close", "mkdirat", "mkdir", "fsync", "fdatasync"}
			p := startProgram(t, nil, straceBin, straceCmd(t, trace, calls, append(how, "--config", cfg)...)...)
			if how[0] == "run" {
				deadline := time.Now().Add(30 * time.Second)
				for !strings.Contains(p.output(), "outputs reconciled") {
					if time.Now().After(deadline) {
						t.Fatalf("run --init did not reconcile its outputs within 30s:\n%s", p.output())
					}
					time.Sleep(20 * time.Millisecond)
				}
				stopTraced(t, p)
			} else {
				select {
				case <-p.done:
				case <-time.After(30 * time.Second):
					t.Fatalf("gateway init did not exit within 30s:\n%s", p.output())
				}
				if !p.cmd.ProcessState.Success() {
					t.Fatalf("gateway init: %v\n%s", p.cmd.ProcessState, p.output())
				}
			}
			evs := parseStrace(t, trace)
			ft := fileTracker{}
			made := map[string]int{} // path → position of its creation
			synced := map[string][]int{}
			for _, e := range evs {
				if path := ft.see(e); path != "" && strings.Contains(openFlags(e), "O_CREAT") {
					if _, ok := made[path]; !ok {
						made[path] = e.n
					}
				}
				if strings.HasPrefix(e.name, "mkdir") && e.ok() {
					if m := regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`).FindStringSubmatch(e.args); m != nil {
						made[m[1]] = e.n
					}
				}
				if isSync(e) {
					synced[ft[e.fd()]] = append(synced[ft[e.fd()]], e.n)
				}
			}
			for _, p := range []string{filepath.Join(dir, "state"), filepath.Join(dir, "state", "sub"), store} {
				at, ok := made[p]
				if !ok {
					t.Fatalf("the trace shows no creation of %s:\n%s", p, describe(evs, 0, len(evs)))
				}
				parent := filepath.Dir(p)
				after := false
				for _, n := range synced[parent] {
					after = after || n > at
				}
				if !after {
					t.Errorf("%s was created, but its directory %s was not fsynced after that: its name is not durable\n%s", p, parent, describe(evs, at, len(evs)))
				}
			}
		})
	}
}
