package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// binary is the gateway built with the failpoints tag, by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gateway-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "gateway")
	// The link is kept here (.gitignore ignores *.test) for the next run.
	if err := testenv.GoBuild("gateway-failpoints.test", binary, "-tags", "failpoints", "."); err != nil {
		fmt.Fprintf(os.Stderr, "build gateway: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a gateway child process.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startProgram(t, env, binary, args...)
}

// startProgram starts prog (the gateway, or a program that runs it) as a
// proc; it is killed when t ends.
func startProgram(t *testing.T, env []string, prog string, args ...string) *proc {
	t.Helper()
	logf, err := os.CreateTemp(t.TempDir(), "gateway-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prog, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, log: logf.Name(), done: make(chan struct{})}
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("output of %s (pid %d):\n%s", filepath.Base(prog), cmd.Process.Pid, p.output())
		}
	})
	return p
}

func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// gatewayID is the id of the gateway a test starts with writeConfig:
// unique to the run, so that no other test's or suite's gateway can answer.
func gatewayID(t testing.TB) string { return testenv.ID(t, "gw") }

// writeConfig writes dir/gateway.yaml for a sim-board gateway with id
// gatewayID(t) and returns its path.
func writeConfig(t *testing.T, dir, broker, httpAddr string) string {
	t.Helper()
	return writeConfigWith(t, dir, gatewayID(t), broker, httpAddr, `actuators:
  - {name: pump, pin: GPIO17}
  - {name: fan, pin: GPIO22, scope: climate}
  - {name: heater, pin: GPIO23, scope: climate, active_low: true}
`)
}

// writeConfigWith writes dir/gateway.yaml for gateway id on the sim board,
// with its store in dir and the given actuators (and interlocks) section.
func writeConfigWith(t *testing.T, dir, id, broker, httpAddr, actuators string) string {
	t.Helper()
	path := filepath.Join(dir, "gateway.yaml")
	cfg := fmt.Sprintf(`id: %s
mqtt:
  broker: %s
store: fence.db
board: sim
http: %q
%s`, id, broker, httpAddr, actuators)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func apiStatus(t *testing.T, addr string) map[string]httpapi.Actuator {
	t.Helper()
	m := map[string]httpapi.Actuator{}
	for _, a := range testctl.Actuators(t, addr) {
		m[a.Name] = a
	}
	return m
}

// checkReconciled asserts that every output's read-back level matches its
// recorded state.
func checkReconciled(t *testing.T, addr, when string) {
	t.Helper()
	for name, a := range apiStatus(t, addr) {
		wantHigh := (a.State == "on") != a.ActiveLow
		if a.Level != map[bool]string{true: "high", false: "low"}[wantHigh] {
			t.Errorf("%s: %s is %q with level %q (active_low %v): latch does not match the record", when, name, a.State, a.Level, a.ActiveLow)
		}
	}
}

type answered struct {
	scope string
	cmd   fence.Command
	res   fence.Result
}

// TestKill9UnderLoad kills the gateway process with SIGKILL at random
// points while controllers send commands, restarts it, and checks that no
// fence went backwards, every command answered applied is covered by the
// recorded fence, and every latch matches the recorded state.
func TestKill9UnderLoad(t *testing.T) {
	dir := t.TempDir()
	broker := testenv.EmbeddedBroker(t)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.Port(t))
	cfg := writeConfig(t, dir, broker, httpAddr)
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: gatewayID(t)})
	scopeOf := map[string]string{"pump": "pump", "fan": "climate", "heater": "climate"}
	tokens := map[string]*atomic.Uint64{"pump": {}, "climate": {}}

	var mu sync.Mutex
	var applied []answered
	prev := map[string]fence.Fence{}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var idSeq atomic.Int64
	idPrefix := testenv.ID(t, "c")
	const rounds = 8
	for round := range rounds {
		p := startProc(t, nil, "run", "--config", cfg, "--init", "--log-level", "warn")
		ctl.WaitStatus(t, "online")
		waitAPI(t, httpAddr, p)
		checkReconciled(t, httpAddr, fmt.Sprintf("round %d after restart", round))

		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, name := range []string{"pump", "fan", "heater"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(idSeq.Add(1)), 2))
				for {
					select {
					case <-stop:
						return
					default:
					}
					scope := scopeOf[name]
					c := fence.Command{ID: fmt.Sprint(idPrefix, "-", idSeq.Add(1)), Actuator: name,
						Fence: fence.Fence{Token: tokens[scope].Add(1)}, State: fence.State(r.IntN(2) + 1)}
					ctl.Publish(t, name, wire.EncodeCommand(c), false)
					res, ok := ctl.TryResult(c.ID, 2*time.Second)
					if ok && res.Outcome == fence.Applied {
						mu.Lock()
						applied = append(applied, answered{scope, c, res})
						mu.Unlock()
					}
				}
			}()
		}
		time.Sleep(time.Duration(50+rng.IntN(350)) * time.Millisecond)
		p.kill()
		close(stop)
		wg.Wait()
		ctl.WaitStatus(t, "offline")

		l, err := fencelog.Open(filepath.Join(dir, "fence.db"), &fencelog.Options{AuditFlush: -1})
		if err != nil {
			t.Fatalf("round %d: reopen store after kill: %v\n%s", round, err, p.output())
		}
		fences, err := l.Fences()
		l.Close()
		if err != nil {
			t.Fatal(err)
		}
		for scope, f := range fences {
			if f.Less(prev[scope]) {
				t.Fatalf("round %d: fence of %s went backwards: %v -> %v", round, scope, prev[scope], f)
			}
			prev[scope] = f
		}
		mu.Lock()
		for _, a := range applied {
			if fences[a.scope].Less(a.cmd.Fence) {
				t.Fatalf("round %d: command %s answered applied at %v but the recorded fence of %s is %v",
					round, a.cmd.ID, a.cmd.Fence, a.scope, fences[a.scope])
			}
		}
		n := len(applied)
		mu.Unlock()
		t.Logf("round %d: %d applied answers so far, fences %v", round, n, fences)
	}
	if len(applied) == 0 {
		t.Fatal("no command was applied: the load never ran")
	}
	p := startProc(t, nil, "run", "--config", cfg, "--log-level", "warn")
	ctl.WaitStatus(t, "online")
	waitAPI(t, httpAddr, p)
	checkReconciled(t, httpAddr, "final restart")
}

// testGateway is a gateway process a test started on a fresh store.
type testGateway struct {
	id, dir, cfg string // its id, its directory (store, latch) and configuration file
	http         string // its API's address; "" without one
	p            *proc
	ctl          *testctl.Controller // a controller of its broker
}

// startGateway starts `gateway run --init` for gateway id gatewayID(t) on
// broker, with the given actuators (and more) section of its
// configuration, its API on a port of its own if api, and flags (none:
// --log-level warn); it waits until the gateway is online and, with an
// API, serves it.
func startGateway(t *testing.T, broker, actuators string, api bool, flags ...string) testGateway {
	t.Helper()
	g := testGateway{id: gatewayID(t), dir: t.TempDir()}
	if api {
		g.http = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	}
	g.cfg = writeConfigWith(t, g.dir, g.id, broker, g.http, actuators)
	if len(flags) == 0 {
		flags = []string{"--log-level", "warn"}
	}
	g.p = startProc(t, nil, append([]string{"run", "--config", g.cfg, "--init"}, flags...)...)
	g.ctl = testctl.Connect(t, broker, wire.Topics{GatewayID: g.id})
	g.ctl.WaitStatus(t, "online")
	if api {
		waitAPI(t, g.http, g.p)
	}
	return g
}

// waitAPI waits until p, and no other process, serves its API on addr.
func waitAPI(t *testing.T, addr string, p *proc) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := fmt.Errorf("gateway (pid %d) does not listen on %s", p.cmd.Process.Pid, addr)
		if testenv.Listens(p.cmd.Process.Pid, addr) {
			resp, gerr := http.Get("http://" + addr + "/api/actuators")
			if gerr == nil {
				resp.Body.Close()
				return
			}
			err = gerr
		}
		select {
		case <-p.done:
			t.Fatalf("gateway exited:\n%s", p.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("API not up: %v\n%s", err, p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCrashBetweenFsyncAndDrive kills the gateway right after its third
// fence commit and before the drive. The store must hold the third fence,
// the latch the second state; the restart reconciles the latch to the
// record, and the broker's redelivery of the third command is answered
// duplicate, not driven again.
func TestCrashBetweenFsyncAndDrive(t *testing.T) {
	dir := t.TempDir()
	broker := testenv.EmbeddedBroker(t)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.Port(t))
	cfg := writeConfig(t, dir, broker, httpAddr)
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: gatewayID(t)})
	p := startProc(t, []string{"FENCEGATE_CRASH_AFTER_COMMIT=3"}, "run", "--config", cfg, "--init")
	ctl.WaitStatus(t, "online")
	// Boot records count as commits too: none here, since --init made a new
	// store whose outputs boot "last" and are recorded off at start. Those
	// go through SetState, not the commit hook.
	cmds := []fence.Command{
		{ID: testenv.ID(t, "k1"), Actuator: "pump", Fence: fence.Fence{Token: 10}, State: fence.StateOn},
		{ID: testenv.ID(t, "k2"), Actuator: "pump", Fence: fence.Fence{Token: 11}, State: fence.StateOff},
		{ID: testenv.ID(t, "k3"), Actuator: "pump", Fence: fence.Fence{Token: 12}, State: fence.StateOn},
	}
	for _, c := range cmds[:2] {
		if res := ctl.Send(t, c); res.Outcome != fence.Applied {
			t.Fatalf("%s = %v (%s)", c.ID, res.Outcome, res.Error)
		}
	}
	ctl.Publish(t, "pump", wire.EncodeCommand(cmds[2]), false)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("gateway did not crash at the failpoint:\n%s", p.output())
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("gateway exit = %v, want killed by SIGKILL", p.cmd.ProcessState)
	}
	latch, _ := boards.ReadLatch(filepath.Join(dir, "fence.db.pins"))
	if latch["GPIO17"] {
		t.Fatal("pump latch high: the third command was driven before the crash")
	}
	l, err := fencelog.Open(filepath.Join(dir, "fence.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := l.Output("pump", "pump")
	l.Close()
	if out.Fence.Token != 12 || out.State != fence.StateOn {
		t.Fatalf("store after crash: %+v, want fence 12 and state on (committed before the crash)", out)
	}
	if _, ok := ctl.TryResult(cmds[2].ID, 200*time.Millisecond); ok {
		t.Fatal("k3 was answered before the crash")
	}

	p = startProc(t, nil, "run", "--config", cfg)
	ctl.WaitStatus(t, "online")
	waitAPI(t, httpAddr, p)
	latch, _ = boards.ReadLatch(filepath.Join(dir, "fence.db.pins"))
	if !latch["GPIO17"] {
		t.Error("pump latch low after restart: not reconciled to the recorded state")
	}
	res := ctl.Result(t, cmds[2].ID)
	if res.Outcome != fence.Duplicate || res.Fence.Token != 12 || res.State != fence.StateOn {
		t.Errorf("redelivered k3 = %v at %v %v, want duplicate at 12 on", res.Outcome, res.Fence, res.State)
	}
	if res := ctl.Send(t, fence.Command{ID: testenv.ID(t, "k0"), Actuator: "pump", Fence: fence.Fence{Token: 11, Seq: 5}, State: fence.StateOff}); res.Outcome != fence.Stale {
		t.Errorf("old token after the crash = %v, want stale", res.Outcome)
	}
}

// cliTimeout bounds a command of runCLI: each ends on its own in a second
// or two. One that runs on (a gateway that started where it should have
// refused) fails the test instead of hanging it.
const cliTimeout = 20 * time.Second

// startedLine is what gateway run logs once it has taken over its outputs:
// past every check at start. A `gateway run` of runCLI is one meant to
// refuse at start, so this line fails the test at once, not at
// cliTimeout.
const startedLine = "outputs reconciled"

func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var out testenv.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var err error
	started := false
wait:
	for {
		select {
		case err = <-exited:
			break wait
		case <-tick.C:
			if !started && len(args) > 0 && args[0] == "run" && strings.Contains(out.String(), startedLine) {
				started = true
				cancel()
			}
		}
	}
	if started {
		t.Fatalf("gateway %v started (it logged %q) where it should have refused:\n%s", args, startedLine, out.String())
	}
	if ctx.Err() != nil {
		t.Fatalf("gateway %v did not exit within %v (was it meant to refuse, and started instead?):\n%s", args, cliTimeout, out.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

// TestCLIConfigErrors checks what gateway check prints for a broken
// configuration: one error per mistake, at the line to edit, and no
// "is required" for keys that are there.
func TestCLIConfigErrors(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(writeConfig(t, dir, "tcp://127.0.0.1:1", ""))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, edit, want string
	}{
		{"duplicate key", string(good) + "id: again\n", `line 11: key "id" is set twice (first on line 1)`},
		{"key indented too little", strings.Replace(string(good), "store:", " store:", 1), `line 4: "store" is indented by 1 space`},
	}
	for _, tt := range tests {
		path := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(path, []byte(tt.edit), 0o644); err != nil {
			t.Fatal(err)
		}
		out, code := runCLI(t, "check", "--config", path)
		want := "gateway: config " + path + ": " + tt.want
		if code != exitConfig || !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 1 || strings.Contains(out, "is required") {
			t.Errorf("%s: gateway check exit %d, output:\n%s\nwant exit 78 and one line starting %q", tt.name, code, out, want)
		}
	}
}

func TestCLIErrors(t *testing.T) {
	dir := t.TempDir()
	good := writeConfig(t, dir, "tcp://127.0.0.1:1", "")
	pi := filepath.Join(dir, "pi.yaml")
	os.WriteFile(pi, []byte("id: x\nmqtt: {broker: tcp://127.0.0.1:1}\nstore: pi.db\nboard: raspberry-pi\nhttp: \"\"\nactuators:\n  - {name: a, pin: GPIO17}\n"), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("id: x\nmqtt: {broker: tcp://h:1}\nstore: s.db\nboard: sim\nactuators:\n  - {name: a, pin: GPIO17}\n  - {name: b, pin: PIN11}\n  - {name: a, pin: GPIO5, colour: red}\n"), 0o644)
	tests := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{}, exitUsage, []string{"Usage"}},
		{[]string{"frobnicate"}, exitUsage, []string{"unknown command"}},
		{[]string{"run"}, exitUsage, []string{"--config is required"}},
		{[]string{"run", "--bogus"}, exitUsage, []string{"flag provided but not defined: -bogus", "Usage:"}},
		{[]string{"run", "--config", filepath.Join(dir, "missing.yaml")}, exitConfig, []string{"no such file"}},
		{[]string{"run", "--config", good}, exitConfig, []string{"store does not exist", "gateway init"}},
		{[]string{"check", "--config", bad}, exitConfig, []string{`unknown key "colour"`, "header pin 11", `"a"`}},
		{[]string{"check", "--config-only", "--config", good}, 0, []string{"ok"}},
		{[]string{"check", "--config", good}, exitConfig, []string{"store: FAIL", "store does not exist", "run would fail"}},
		{[]string{"check", "--init", "--config", good}, 0, []string{"--init would create it", "ok: gateway run would start"}},
		{[]string{"inspect", "--store", filepath.Join(dir, "nope.db")}, exitConfig, []string{"does not exist"}},
		{[]string{"inspect", "--store", filepath.Join(dir, "nope.db"), "--audit", "-1"}, exitUsage, []string{"--audit -1"}},
		{[]string{"version"}, 0, []string{"fencegate"}},
		{[]string{"init", "--config", good, "--new"}, 0, []string{"created store"}},
		{[]string{"init", "--config", good, "--new"}, exitFailure, []string{"already exists"}},
		{[]string{"init", "--config", bad, "--new"}, exitConfig, []string{"unknown key"}},
		{[]string{"check", "--config", good}, 0, []string{"store: ok", "a fencegate store", "ok: gateway run would start"}},
		{[]string{"run", "--config", pi, "--init"}, exitConfig, []string{"not a supported Raspberry Pi"}},
		{[]string{"check", "--config", pi, "--init"}, exitConfig, []string{"board: FAIL", "not a supported Raspberry Pi"}},
		{[]string{"inspect", "--store", filepath.Join(dir, "fence.db"), "--audit", "0"}, 0, []string{`"fences": []`, `"audit": []`}},
	}
	for _, tt := range tests {
		out, code := runCLI(t, tt.args...)
		if code != tt.code {
			t.Errorf("gateway %v exit %d, want %d\n%s", tt.args, code, tt.code, out)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("gateway %v output lacks %q:\n%s", tt.args, w, out)
			}
		}
	}
	// Only init created the store: the failed run before it did not (run
	// came first in the table and exited 2 on the missing store), nor did
	// run --init on a board that is not there.
	if _, err := os.Stat(filepath.Join(dir, "pi.db")); err == nil {
		t.Error("gateway run --init on a board that is not there left a new store behind")
	}
}

// TestRunInitLeavesNoStore: gateway run --init checks what it opens after
// the store, as gateway check --init does, before it creates the store: an
// HTTP address in use fails the start, saying why, and leaves no store
// behind (it created the store, then exited 1; the next start took that
// store for the one that was there).
func TestRunInitLeavesNoStore(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // the HTTP address, taken
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "tcp://127.0.0.1:1", ln.Addr().String())
	store := filepath.Join(dir, "fence.db")
	out, code := runCLI(t, "run", "--config", cfg, "--init")
	want := fmt.Sprintf("gateway: http %s: listen tcp %s: bind: address already in use", ln.Addr(), ln.Addr())
	if code != exitFailure || !strings.Contains(out, want) || !strings.Contains(out, "the store "+store+" was not created") {
		t.Errorf("gateway run --init with its HTTP address taken: exit %d, want %d with %q, and that the store was not created:\n%s", code, exitFailure, want, out)
	}
	if _, err := os.Stat(store); err == nil {
		t.Errorf("gateway run --init left a new store behind: %s", store)
	}
}
