//go:build linux

package torture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/modbusio/modbussim"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// Knobs of a run, from the environment.
const (
	envCycles  = "FENCEGATE_TORTURE_CYCLES" // gateway stops and restarts; default shortCycles
	envRunSeed = "FENCEGATE_TORTURE_SEED"   // replays a run's choices
	envOut     = "FENCEGATE_TORTURE_OUT"    // where a failed run leaves its logs and history visualization; default the temporary directory
)

// shortCycles is the cycles of the short version, which make test runs.
const shortCycles = 4

// controllers are the controller processes: the first ones resend
// unanswered commands as package client does by default, the others
// never do, so that their commands are answered only if the broker and
// the gateway lose none.
var controllers = []struct{ resend bool }{{true}, {true}, {true}, {false}, {false}}

// answerWait bounds how long, after the gateway is back, the commands
// published before it stopped may take to be answered.
const answerWait = 30 * time.Second

// TestTorture: see the package comment.
func TestTorture(t *testing.T) {
	cycles := shortCycles
	if s := os.Getenv(envCycles); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of cycles, 1 or more", envCycles, s)
		}
		cycles = n
	}
	seed := rand.Uint64()
	if s := os.Getenv(envRunSeed); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want the seed a run printed", envRunSeed, s)
		}
		seed = n
	}
	t.Logf("seed %d (%s=%d replays this run's choices), %d cycles", seed, envRunSeed, seed, cycles)
	start := time.Now()
	h := newHarness(t, seed, testenv.Mosquitto(t))
	// Before the gateway's first connection there is no subscription and
	// no session: commands published then are dropped (and resent).
	h.startGateway()
	h.checkRestart(-1)
	h.startControllers()
	for cycle := range cycles {
		h.cycle(cycle)
	}
	h.finish()
	elapsed := time.Since(start)
	t.Logf("%d cycles in %v (%.2f cycles/s): %s", cycles, elapsed.Round(time.Millisecond), float64(cycles)/elapsed.Seconds(), h.summary())
	h.checkHistory()
}

// harness runs the gateway and the controllers and checks them.
type harness struct {
	t        *testing.T
	seed     uint64
	rng      *rand.Rand
	dir      string
	broker   string
	topics   wire.Topics
	httpAddr string
	cfg      string
	obs      *observer
	ctls     []*ctlProc
	gw       *gwProc         // the running gateway, or nil
	gwLogs   []string        // every gateway process's log
	downs    []down          // when the gateway was down
	fences   map[string]pair // the fences read from the store after the last stop
	hung     int             // clean stops that did not end within cleanStopWait
	all      []*op           // every controller's commands, as ops read them
}

// down is a time the gateway was down: stopped at at (cleanly or killed),
// its process gone at gone, back online at online (0 while it is down).
type down struct {
	at, gone, online int64
	clean            bool
}

func newHarness(t *testing.T, seed uint64, broker string) *harness {
	h := &harness{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0)), dir: t.TempDir(), broker: broker,
		topics: wire.Topics{Prefix: wire.DefaultPrefix, GatewayID: testenv.ID(t, "gw")}, fences: map[string]pair{}}
	h.httpAddr = fmt.Sprintf("127.0.0.1:%d", testenv.Port(t))
	// The Modbus module outlives every gateway process, as a module on
	// its own power supply does.
	module, err := modbussim.Start(fmt.Sprintf("tcp://127.0.0.1:%d", testenv.Port(t)), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { module.Close() })
	var b strings.Builder
	fmt.Fprintf(&b, "id: %s\nmqtt: {broker: %s}\nstore: fence.db\nboard: sim\nhttp: %q\n", h.topics.GatewayID, broker, h.httpAddr)
	fmt.Fprintf(&b, "modbus:\n  - {name: relays, url: %q, poll: 200ms}\nactuators:\n", module.URL())
	for _, a := range actuators {
		if a.pin == "" {
			fmt.Fprintf(&b, "  - {name: %s, scope: %s, active_low: %v, modbus: {bus: relays, unit: 1, coil: 0}}\n", a.name, a.scope, a.activeLow)
			continue
		}
		fmt.Fprintf(&b, "  - {name: %s, pin: %s, scope: %s, active_low: %v}\n", a.name, a.pin, a.scope, a.activeLow)
	}
	fmt.Fprintf(&b, "interlocks:\n  - {name: vent, actuators: [%s], dead_time: 20ms}\n", strings.Join(interlocked, ", "))
	h.cfg = filepath.Join(h.dir, "gateway.yaml")
	if err := os.WriteFile(h.cfg, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	h.obs = observe(t, broker, h.topics)
	t.Cleanup(func() {
		if h.gw != nil {
			h.gw.cmd.Process.Kill()
			<-h.gw.done
		}
		for _, c := range h.ctls {
			c.cmd.Process.Kill()
			<-c.done
		}
	})
	return h
}

// fatalf fails the test, with the seed that replays it, the warnings and
// errors every gateway process logged and the newest one's log. The
// logs of the gateway processes and controllers are kept in
// FENCEGATE_TORTURE_OUT.
func (h *harness) fatalf(format string, a ...any) {
	h.t.Helper()
	msg := fmt.Sprintf(format, a...)
	var warnings []string
	for _, log := range h.gwLogs {
		b, _ := os.ReadFile(log)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
				warnings = append(warnings, filepath.Base(log)+": "+l)
			}
		}
	}
	if len(warnings) > 0 {
		msg += "\nthe gateway processes' warnings and errors:\n" + strings.Join(warnings[max(0, len(warnings)-30):], "\n")
	}
	if n := len(h.gwLogs); n > 0 {
		b, _ := os.ReadFile(h.gwLogs[n-1])
		msg += fmt.Sprintf("\nthe newest gateway process's log (%s) ends:\n%s", filepath.Base(h.gwLogs[n-1]), b[max(0, len(b)-4000):])
	}
	keep, err := h.keep()
	if err != nil {
		msg += "\n" + err.Error()
	}
	if keep != "" {
		msg += fmt.Sprintf("\nthe gateway processes' and the controllers' logs, and what the observer saw, are in %s (%s=%s go test -run TestTortureRecheck ./tests/torture checks them again)",
			keep, envRecheck, keep)
	}
	h.t.Fatalf("%s\n(seed %d: %s=%d replays this run's choices)", msg, h.seed, envRunSeed, h.seed)
}

// keep copies the run's logs and what the observer saw to a directory
// of outDir named for the seed, for TestTortureRecheck, and returns it
// ("" if it could not be made).
func (h *harness) keep() (string, error) {
	keep := filepath.Join(outDir(), fmt.Sprintf("fencegate-torture-%d", h.seed))
	if err := os.MkdirAll(keep, 0o755); err != nil {
		return "", err
	}
	logs, _ := filepath.Glob(filepath.Join(h.dir, "*.log"))
	ctls, _ := filepath.Glob(filepath.Join(h.dir, "*.jsonl"))
	for _, f := range append(logs, ctls...) {
		if b, err := os.ReadFile(f); err == nil {
			os.WriteFile(filepath.Join(keep, filepath.Base(f)), b, 0o644)
		}
	}
	return keep, h.saveRecord(filepath.Join(keep, recordFile))
}

// outDir is where a failed run leaves its logs and its history's
// visualization.
func outDir() string {
	if d := os.Getenv(envOut); d != "" {
		return d
	}
	return os.TempDir()
}

// ctlProc is a controller process.
type ctlProc struct {
	idx    int
	resend bool
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	log    string
	stderr bytes.Buffer
	done   chan struct{}
	read   int64            // how much of the log ops has read
	ops    map[int]*op      // its commands, by number
	saw    map[string]int64 // when it last logged that it saw each gateway status
}

func (h *harness) startControllers() {
	self, err := os.Executable()
	if err != nil {
		h.t.Fatal(err)
	}
	for i, c := range controllers {
		p := &ctlProc{idx: i, resend: c.resend, log: filepath.Join(h.dir, fmt.Sprintf("ctl%d.jsonl", i)), done: make(chan struct{}), ops: map[int]*op{}}
		p.cmd = exec.Command(self, "-test.run=^$")
		resend := "0"
		if c.resend {
			resend = "1"
		}
		p.cmd.Env = append(os.Environ(), roleEnv+"=controller", envBroker+"="+h.broker, envGateway+"="+h.topics.GatewayID,
			envIndex+"="+strconv.Itoa(i), envSeed+"="+strconv.FormatUint(h.seed, 10), envResend+"="+resend, envLog+"="+p.log)
		p.cmd.Stdout, p.cmd.Stderr = &p.stderr, &p.stderr
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			h.t.Fatal(err)
		}
		if err := testenv.StartChild(p.cmd); err != nil {
			h.t.Fatal(err)
		}
		go func() { p.cmd.Wait(); close(p.done) }()
		h.ctls = append(h.ctls, p)
	}
}

// gwProc is a gateway process.
type gwProc struct {
	cmd     *exec.Cmd
	started int64
	done    chan struct{}
}

// startGateway starts the gateway and waits until it is online and its
// API answers.
func (h *harness) startGateway() {
	h.t.Helper()
	log := filepath.Join(h.dir, fmt.Sprintf("gateway-%d.log", len(h.gwLogs)))
	h.gwLogs = append(h.gwLogs, log)
	logf, err := os.Create(log)
	if err != nil {
		h.t.Fatal(err)
	}
	args := []string{"run", "--config", h.cfg, "--log-level", "info"}
	if len(h.gwLogs) == 1 {
		args = append(args, "--init")
	}
	p := &gwProc{cmd: exec.Command(gatewayBin, args...), started: now(), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := testenv.StartChild(p.cmd); err != nil {
		h.t.Fatal(err)
	}
	go func() { p.cmd.Wait(); logf.Close(); close(p.done) }()
	h.gw = p
	deadline := time.Now().Add(30 * time.Second)
	for {
		online := h.obs.onlineSince(p.started)
		if online > 0 && testenv.Listens(p.cmd.Process.Pid, h.httpAddr) {
			if resp, err := http.Get("http://" + h.httpAddr + "/api/actuators"); err == nil {
				resp.Body.Close()
				if n := len(h.downs); n > 0 {
					h.downs[n-1].online = online
				}
				return
			}
		}
		select {
		case <-p.done:
			h.fatalf("the gateway exited at start: %v", p.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			h.fatalf("the gateway was not online with its API on %s within 30 s", h.httpAddr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cleanStopWait bounds a clean stop; then the gateway is killed.
const cleanStopWait = 10 * time.Second

// stopGateway stops the gateway: cleanly (SIGTERM) or with SIGKILL.
func (h *harness) stopGateway(clean bool) {
	h.t.Helper()
	p := h.gw
	h.downs = append(h.downs, down{at: now(), clean: clean})
	sig := syscall.SIGKILL
	if clean {
		sig = syscall.SIGTERM
	}
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(cleanStopWait):
		h.hung++
		h.t.Logf("the gateway's clean stop did not end within %v: killed", cleanStopWait)
		p.cmd.Process.Kill()
		<-p.done
	}
	h.downs[len(h.downs)-1].gone = now()
	h.gw = nil
}

// cycle runs the gateway for a while under load, stops it (killed, or
// every fourth time cleanly), checks the store and the outputs it left,
// starts it again, and checks the outputs after reconciliation and that
// every command published before the stop was answered.
func (h *harness) cycle(n int) {
	h.t.Helper()
	if h.gw == nil {
		h.startGateway()
		h.checkRestart(n)
	}
	time.Sleep(time.Duration(200+h.rng.IntN(1300)) * time.Millisecond) // the load runs
	clean := n%4 == 1
	h.stopGateway(clean)
	h.checkStopped(n)
	if clean {
		h.awaitSeen(n, wire.StatusOffline, h.downs[len(h.downs)-1].at)
	}
	h.awaitSentWhileDown(n)
	time.Sleep(time.Duration(h.rng.IntN(400)) * time.Millisecond) // commands queue (or are dropped, after a clean stop)
	h.startGateway()
	h.checkRestart(n)
	if clean {
		h.checkResent(n)
	}
	h.checkAnswered(n, h.downs[len(h.downs)-1].at)
}

// seenWait bounds awaitSeen.
const seenWait = 30 * time.Second

// awaitSeen asks every controller that resends to log when its client
// has seen the gateway's status be status, and waits until each has,
// after after. It returns when each saw it.
func (h *harness) awaitSeen(n int, status string, after int64) map[int]int64 {
	h.t.Helper()
	for _, c := range h.ctls {
		if c.resend {
			io.WriteString(c.stdin, status+"\n")
		}
	}
	deadline := time.Now().Add(seenWait)
	for {
		h.ops()
		seen := map[int]int64{}
		var missing []string
		for _, c := range h.ctls {
			if !c.resend {
				continue
			}
			if t := c.saw[status]; t > after {
				seen[c.idx] = t
			} else {
				missing = append(missing, strconv.Itoa(c.idx))
			}
		}
		if len(missing) == 0 {
			return seen
		}
		if time.Now().After(deadline) {
			h.fatalf("cycle %d: controllers %s did not see the gateway %s within %v", n, strings.Join(missing, ", "), status, seenWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// resendGrace bounds how long a controller that saw the gateway come
// online may take to publish again the commands it waits for: its client
// wakes them when it takes the status, before it says it saw it.
const resendGrace = 2 * time.Second

// checkResent checks, after a clean stop and the restart, that every
// controller that resends, once it saw the gateway online, published
// again each command it was still waiting for (or had its answer): the
// broker dropped those published while the gateway was away, its
// subscription removed, and only a resend brings them to it. Each such
// controller sent one while the gateway was down (awaitSentWhileDown), so
// a controller that never resends fails here, not at checkAnswered's
// deadline.
func (h *harness) checkResent(n int) {
	h.t.Helper()
	started := h.gw.started
	seen := h.awaitSeen(n, wire.StatusOnline, started)
	var waiting []*op
	last := int64(0)
	for _, op := range h.ops() {
		if t, ok := seen[op.ctl]; ok && op.call < t && (op.ret == 0 || op.ret > t) {
			waiting = append(waiting, op)
			last = max(last, t)
		}
	}
	resent := func(op *op) bool {
		return len(h.obs.answersOf(op.cmd.key())) > 0 ||
			slices.ContainsFunc(h.obs.copiesOf(op.cmd.key()), func(t int64) bool { return t > started })
	}
	synced := false
	for {
		waiting = slices.DeleteFunc(waiting, resent)
		if len(waiting) == 0 {
			return
		}
		if synced {
			break
		}
		if now() > last+int64(resendGrace) {
			h.obs.sync(h.t) // what the controllers published by now has reached the observer
			synced = true
			continue
		}
		time.Sleep(10 * time.Millisecond)
	}
	var b strings.Builder
	for _, op := range waiting[:min(len(waiting), 10)] {
		fmt.Fprintf(&b, "\n  controller %d: %s, sent %.3f s before the gateway started, %d copies published, all before",
			op.ctl, op.cmd, float64(started-op.call)/1e9, len(h.obs.copiesOf(op.cmd.key())))
	}
	h.fatalf("cycle %d: %d commands that resending controllers were waiting for when they saw the gateway come online were not published again within %v:%s",
		n, len(waiting), resendGrace, b.String())
}

// sentWhileDownWait bounds awaitSentWhileDown.
const sentWhileDownWait = 5 * time.Second

// awaitSentWhileDown makes, after a clean stop, every controller that
// resends send a new command (besides the one it may be waiting for) and
// waits until they have, so that every such cycle has commands the broker
// drops, since the stop removed the gateway's subscription, and only a
// resend brings to the gateway. (After a kill, the commands in flight
// wait in the broker's session.)
func (h *harness) awaitSentWhileDown(n int) {
	h.t.Helper()
	d := h.downs[len(h.downs)-1]
	if !d.clean {
		return
	}
	for _, c := range h.ctls {
		if c.resend {
			io.WriteString(c.stdin, "now\n")
		}
	}
	deadline := time.Now().Add(sentWhileDownWait)
	for {
		sent := map[int]bool{}
		for _, op := range h.ops() {
			sent[op.ctl] = sent[op.ctl] || op.call > d.gone && op.kind == "now"
		}
		missing := 0
		for _, c := range h.ctls {
			if c.resend && !sent[c.idx] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			h.fatalf("cycle %d: %d controllers did not send a command within %v of being told to", n, missing, sentWhileDownWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkStopped checks what a stopped gateway left: at most one member of
// the interlock is high in the latch, no scope's fence went back, and
// every command answered applied is covered by its scope's fence.
func (h *harness) checkStopped(n int) {
	h.t.Helper()
	latch, err := boards.ReadLatch(filepath.Join(h.dir, "fence.db.pins"))
	if err != nil {
		h.fatalf("cycle %d: %v", n, err)
	}
	var on []string
	for _, a := range actuators {
		if slices.Contains(interlocked, a.name) && latch[a.pin] != a.activeLow {
			on = append(on, a.name)
		}
	}
	if len(on) > 1 {
		h.fatalf("cycle %d: after the stop, the latch has the interlocked %s all on", n, strings.Join(on, " and "))
	}
	fences := h.inspect()
	for scope, f := range h.fences {
		if fences[scope].less(f) {
			h.fatalf("cycle %d: the fence of %s went back from %s to %s", n, scope, f, fences[scope])
		}
	}
	h.fences = fences
	h.checkCovered(fmt.Sprintf("cycle %d", n))
}

// inspect reads every scope's fence with gateway inspect.
func (h *harness) inspect() map[string]pair {
	h.t.Helper()
	out, err := exec.Command(gatewayBin, "inspect", "--store", filepath.Join(h.dir, "fence.db"), "--audit", "0").Output()
	if err != nil {
		h.fatalf("gateway inspect: %v\n%s", err, out)
	}
	var doc struct {
		Fences []struct {
			Scope      string
			Token, Seq uint64
		}
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		h.fatalf("gateway inspect: %v\n%s", err, out)
	}
	m := map[string]pair{}
	for _, f := range doc.Fences {
		m[f.Scope] = pair{f.Token, f.Seq}
	}
	return m
}

// checkCovered checks that every command answered applied, as any
// controller or the observer saw it, is covered by its scope's recorded
// fence.
func (h *harness) checkCovered(when string) {
	h.t.Helper()
	for _, op := range h.ops() {
		if op.res != nil && op.res.Outcome == "applied" && h.fences[op.cmd.Scope].less(op.cmd.Pair) {
			h.fatalf("%s: controller %d saw %s answered applied, but the recorded fence of %s is %s",
				when, op.ctl, op.cmd, op.cmd.Scope, h.fences[op.cmd.Scope])
		}
	}
	scopeOf := map[string]string{}
	for _, a := range actuators {
		scopeOf[a.name] = a.scope
	}
	for k, as := range h.obs.allAnswers() {
		for _, a := range as {
			if a.a.Outcome == "applied" && h.fences[scopeOf[k.Actuator]].less(k.Pair) {
				h.fatalf("%s: %s %s %s was answered applied, but the recorded fence of %s is %s",
					when, k.ID, k.Actuator, k.Pair, scopeOf[k.Actuator], h.fences[scopeOf[k.Actuator]])
			}
		}
	}
}

// checkRestart checks a gateway that is back: every output's level is
// its recorded state (reconciled), at most one member of the interlock is
// on, and no fence is below the one the store had when it stopped.
func (h *harness) checkRestart(n int) {
	h.t.Helper()
	resp, err := http.Get("http://" + h.httpAddr + "/api/actuators")
	if err != nil {
		h.fatalf("cycle %d: %v", n, err)
	}
	var list []httpapi.Actuator
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil {
		h.fatalf("cycle %d: /api/actuators: %v", n, err)
	}
	var on []string
	for _, a := range list {
		wantHigh := (a.State == "on") != a.ActiveLow
		if a.Level != map[bool]string{true: "high", false: "low"}[wantHigh] {
			h.fatalf("cycle %d, after the restart: %s is recorded %q, but its pin is %s (active_low %v): not reconciled", n, a.Name, a.State, a.Level, a.ActiveLow)
		}
		if slices.Contains(interlocked, a.Name) && a.State == "on" {
			on = append(on, a.Name)
		}
		if f := pairOf(a.Fence); f.less(h.fences[a.Scope]) {
			h.fatalf("cycle %d, after the restart: the fence of %s is %s, below the %s recorded at the stop", n, a.Scope, f, h.fences[a.Scope])
		}
	}
	if len(on) > 1 {
		h.fatalf("cycle %d, after the restart: the interlocked %s are all on", n, strings.Join(on, " and "))
	}
}

// exempt reports whether a command sent at t by a controller that does
// not resend may go unanswered: it was published while the gateway was
// down after a clean stop, which removes its subscription, so the broker
// drops what is published to it (docs/protocol.md, Clean stop).
func (h *harness) exempt(op *op) bool {
	if controllers[op.ctl].resend {
		return false
	}
	for _, d := range h.downs {
		if d.clean && op.call >= d.at && (d.online == 0 || op.call <= d.online) {
			return true
		}
	}
	return false
}

// checkAnswered waits until every command sent before before (except the
// exempt ones) was answered, then checks every such command's answers.
func (h *harness) checkAnswered(n int, before int64) {
	h.t.Helper()
	deadline := time.Now().Add(answerWait)
	missing := h.ops()
	for {
		missing = slices.DeleteFunc(slices.Clone(missing), func(op *op) bool {
			return op.call >= before || h.exempt(op) || len(h.obs.answersOf(op.cmd.key())) > 0
		})
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, op := range missing[:min(len(missing), 10)] {
				fmt.Fprintf(&b, "\n  controller %d (resends: %v): %s, sent %.3f s before the stop, %d copies published",
					op.ctl, controllers[op.ctl].resend, op.cmd, float64(before-op.call)/1e9, len(h.obs.copiesOf(op.cmd.key())))
			}
			h.fatalf("cycle %d: %d commands sent before the gateway stopped were not answered within %v of its restart: lost%s",
				n, len(missing), answerWait, b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.checkAnswers(fmt.Sprintf("cycle %d", n), before)
}

// checkAnswers checks the answers of every command first sent before
// before: none was applied twice or failed; every answer but stale
// carries the command's pair as its fence, and a stale one a fence not
// below it (the history check checks each command's first answer
// further); a command answered more
// often than it was published was redelivered across a stop of the
// gateway; its answers agree (after applied: duplicate or stale; after
// an interlock's refusal: the same refusal or stale); and each answer a
// controller took was published for its command.
func (h *harness) checkAnswers(when string, before int64) {
	h.t.Helper()
	// What the controllers saw, then the answers, then the copies, each
	// complete for what came before it (see observer.sync).
	ops := h.ops()
	h.obs.sync(h.t)
	answers := h.obs.allAnswers()
	h.obs.sync(h.t)
	allCopies := h.obs.allCopies()
	first := map[key]int64{}
	for _, op := range ops {
		if t, ok := first[op.cmd.key()]; !ok || op.call < t {
			first[op.cmd.key()] = op.call
		}
	}
	for k, t0 := range first {
		if t0 >= before {
			continue
		}
		as, copies := answers[k], allCopies[k]
		count := map[string]int{}
		for _, a := range as {
			count[a.a.Outcome+"/"+a.a.Reason]++
			switch {
			case a.a.Outcome == "failed":
				h.fatalf("%s: %s %s %s was answered failed: %s", when, k.ID, k.Actuator, k.Pair, a.a.Error)
			case a.a.Outcome == "stale" && a.a.Fence.less(k.Pair):
				h.fatalf("%s: %s %s %s was answered stale with the lower fence %s", when, k.ID, k.Actuator, k.Pair, a.a.Fence)
			case a.a.Outcome != "stale" && a.a.Fence != k.Pair:
				h.fatalf("%s: %s %s %s was answered %s: the fence of its own decision is its pair", when, k.ID, k.Actuator, k.Pair, a.a)
			}
		}
		switch {
		case count["applied/"] > 1:
			h.fatalf("%s: %s %s %s was answered applied %d times: driven more than once", when, k.ID, k.Actuator, k.Pair, count["applied/"])
		case count["applied/"] == 1 && count["applied/"]+count["duplicate/"]+count["stale/"] != len(as):
			h.fatalf("%s: %s %s %s was applied, and also answered %v", when, k.ID, k.Actuator, k.Pair, count)
		case count["rejected/interlock"] > 0 && count["rejected/interlock"]+count["stale/"] != len(as):
			h.fatalf("%s: %s %s %s was refused by the interlock, and also answered %v", when, k.ID, k.Actuator, k.Pair, count)
		}
		if len(as) > len(copies) && len(copies) > 0 {
			// Between its first publication (not when the observer got
			// it: that can be later than when the gateway did) and its
			// last answer.
			last := as[len(as)-1].t
			redelivered := false
			for _, d := range h.downs {
				redelivered = redelivered || d.at > t0 && d.at < last
			}
			if !redelivered {
				var b strings.Builder
				for _, c := range copies {
					fmt.Fprintf(&b, "\n  published at %+.3f s", float64(c-t0)/1e9)
				}
				for _, a := range as {
					fmt.Fprintf(&b, "\n  answered %s at %+.3f s", a.a, float64(a.t-t0)/1e9)
				}
				for _, d := range h.downs {
					if d.at > t0-1e9 && d.at < last+1e9 {
						fmt.Fprintf(&b, "\n  the gateway stopped at %+.3f s (clean: %v)", float64(d.at-t0)/1e9, d.clean)
					}
				}
				h.fatalf("%s: %s %s %s was published %d times and answered %d times, with no stop of the gateway in between:%s",
					when, k.ID, k.Actuator, k.Pair, len(copies), len(as), b.String())
			}
		}
	}
	for _, op := range ops {
		if op.call >= before || op.res == nil {
			continue
		}
		found := false
		for _, a := range answers[op.cmd.key()] {
			found = found || a.a.Outcome == op.res.Outcome && a.a.Fence == op.res.Fence && a.a.State == op.res.State
		}
		if !found {
			h.fatalf("%s: controller %d took %s as the answer to %s, but the gateway published no such answer for it", when, op.ctl, op.res, op.cmd)
		}
	}
}

// finish lets the controllers end their last commands, checks that every
// command was answered (those of resending controllers all by their
// Send), and stops the gateway a last time to check its store.
func (h *harness) finish() {
	h.t.Helper()
	if h.gw == nil {
		h.startGateway()
		h.checkRestart(-1)
	}
	for _, c := range h.ctls {
		c.stdin.Close()
	}
	for _, c := range h.ctls {
		select {
		case <-c.done:
		case <-time.After(resendingWait + 30*time.Second):
			h.fatalf("controller %d did not finish its last command", c.idx)
		}
		if !c.cmd.ProcessState.Success() {
			h.fatalf("controller %d: %v\n%s", c.idx, c.cmd.ProcessState, c.stderr.String())
		}
	}
	end := now()
	h.checkAnswered(-1, end)
	for _, op := range h.ops() {
		if op.ret == 0 {
			h.fatalf("controller %d ended without the end of its Send of %s", op.ctl, op.cmd)
		}
		if controllers[op.ctl].resend && op.res == nil {
			h.fatalf("controller %d, which resends, got no answer to %s within %v: %s", op.ctl, op.cmd, resendingWait, op.err)
		}
	}
	h.stopGateway(true)
	h.checkStopped(-1)
}

// op is one Send of a controller: the command, when it was sent and when
// Send returned, and its answer if it had one.
type op struct {
	ctl       int
	n         int
	kind      string
	cmd       command
	call, ret int64
	res       *answer
	err       string
}

// ops reads what the controllers' logs added since the last call and
// returns every command sent so far.
func (h *harness) ops() []*op {
	h.t.Helper()
	for _, c := range h.ctls {
		f, err := os.Open(c.log)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			h.t.Fatal(err)
		}
		b, err := io.ReadAll(io.NewSectionReader(f, c.read, 1<<40))
		f.Close()
		if err != nil {
			h.t.Fatal(err)
		}
		b = b[:bytes.LastIndexByte(b, '\n')+1] // not the line being written
		c.read += int64(len(b))
		for _, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			var l logLine
			if err := json.Unmarshal(line, &l); err != nil {
				h.fatalf("controller %d's log %s: %v: %s", c.idx, c.log, err, line)
			}
			switch l.Ev {
			case "call":
				o := &op{ctl: l.Ctl, n: l.Op, kind: l.Kind, cmd: *l.Cmd, call: l.T}
				c.ops[l.Op] = o
				h.all = append(h.all, o)
			case "ret":
				if o := c.ops[l.Op]; o != nil {
					o.ret, o.res, o.err = l.T, l.Res, l.Err
				}
			case "status":
				if c.saw == nil {
					c.saw = map[string]int64{}
				}
				c.saw[l.Status] = l.T
			}
		}
	}
	return h.all
}

// summary counts the commands by kind and their answers by outcome.
func (h *harness) summary() string {
	kinds, outcomes := map[string]int{}, map[string]int{}
	ops := h.ops()
	for _, op := range ops {
		kinds[op.kind]++
		if op.res != nil {
			outcomes[op.res.Outcome+op.res.Reason]++
		} else {
			outcomes["none"]++
		}
	}
	kills, clean := 0, 0
	for _, d := range h.downs {
		if d.clean {
			clean++
		} else {
			kills++
		}
	}
	answers, copies := h.obs.counts()
	return fmt.Sprintf("%d commands %v, answers %v; %d kills, %d clean stops (%d hung); %d answers and %d copies on the wire",
		len(ops), kinds, outcomes, kills, clean, h.hung, answers, copies)
}

// observer records, with their times, every command published to the
// gateway (each copy), every answer and every status it publishes.
type observer struct {
	c         mqtt.Client
	syncTopic string

	mu      sync.Mutex
	copies  map[key][]int64
	answers map[key][]seen
	online  []int64 // when "online" was published
	marks   map[string]bool
	changed chan struct{} // closed and replaced when a mark arrives
}

// seen is an answer and when the observer received it.
type seen struct {
	t int64
	a answer
}

func observe(t *testing.T, broker string, topics wire.Topics) *observer {
	t.Helper()
	o := &observer{copies: map[key][]int64{}, answers: map[key][]seen{}, marks: map[string]bool{}, changed: make(chan struct{}),
		syncTopic: topics.Prefix + "/" + topics.GatewayID + "/torture-sync"}
	c := mqtt.NewClient(mqtt.NewClientOptions().AddBroker(broker).SetClientID(testenv.ID(t, "observer")).SetOrderMatters(true))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("observer: connect: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	handle := func(_ mqtt.Client, m mqtt.Message) {
		at := now()
		o.mu.Lock()
		defer o.mu.Unlock()
		if m.Topic() == o.syncTopic {
			o.marks[string(m.Payload())] = true
			close(o.changed)
			o.changed = make(chan struct{})
			return
		}
		if m.Topic() == topics.Status() {
			if string(m.Payload()) == wire.StatusOnline && !m.Retained() {
				o.online = append(o.online, at)
			}
			return
		}
		name, kind := topics.Parse(m.Topic())
		if strings.HasPrefix(m.Topic(), topics.ReplyBase()) {
			kind = wire.KindResult // the controllers' own answer topics
		}
		switch kind {
		case wire.KindSet:
			if c, err := wire.DecodeCommand(name, m.Payload()); err == nil {
				k := key{c.ID, c.Actuator, pairOf(c.Fence)}
				o.copies[k] = append(o.copies[k], at)
			}
		case wire.KindResult:
			if r, err := wire.DecodeResult(m.Payload()); err == nil {
				k := key{r.ID, r.Actuator, pairOf(r.Command)}
				o.answers[k] = append(o.answers[k], seen{at, answerOf(r)})
			}
		}
	}
	subs := map[string]byte{topics.SetFilter(): 1, topics.ResultFilter(): 1, topics.ReplyFilter(): 1, topics.Status(): 1, o.syncTopic: 1}
	if tok := c.SubscribeMultiple(subs, handle); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("observer: subscribe: %v", tok.Error())
	}
	o.c = c
	return o
}

// sync waits until the observer has received every message the broker
// took before the call. The broker sends the commands' copies to the
// observer at QoS 1, which wait while its window of messages in flight is
// full, and the answers at QoS 0, which do not: an answer can overtake the
// command it answers. A mark published at each QoS arrives after what
// the broker queued for the observer before it.
func (o *observer) sync(t *testing.T) {
	t.Helper()
	if o.c == nil {
		return // a record read back: nothing more comes
	}
	want := []string{fmt.Sprint(now(), "-0"), fmt.Sprint(now(), "-1")}
	for qos, mark := range want {
		if tok := o.c.Publish(o.syncTopic, byte(qos), false, mark); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("observer: publish a mark: %v", tok.Error())
		}
	}
	timeout := time.After(30 * time.Second)
	for {
		o.mu.Lock()
		got, ch := o.marks[want[0]] && o.marks[want[1]], o.changed
		o.mu.Unlock()
		if got {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatal("observer: its marks did not come back within 30 s")
		}
	}
}

func (o *observer) allCopies() map[key][]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return cloneAll(o.copies)
}

func cloneAll[V any](m map[key][]V) map[key][]V {
	c := make(map[key][]V, len(m))
	for k, v := range m {
		c[k] = slices.Clone(v)
	}
	return c
}

// onlineSince returns when the gateway said online after t, or 0.
func (o *observer) onlineSince(t int64) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, at := range o.online {
		if at >= t {
			return at
		}
	}
	return 0
}

func (o *observer) answersOf(k key) []seen {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.answers[k])
}

func (o *observer) copiesOf(k key) []int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.copies[k])
}

func (o *observer) allAnswers() map[key][]seen {
	o.mu.Lock()
	defer o.mu.Unlock()
	return cloneAll(o.answers)
}

// counts returns how many answers and how many copies of commands o saw.
func (o *observer) counts() (answers, copies int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, v := range o.answers {
		answers += len(v)
	}
	for _, v := range o.copies {
		copies += len(v)
	}
	return answers, copies
}
