package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/scenario"
	"github.com/fencegate/fencegate/sim"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// runningSim starts `gateway sim` on free ports and returns its dashboard
// and broker URLs, read from its ready message.
func runningSim(t *testing.T, extra ...string) (dashboard, broker string) {
	t.Helper()
	dashboard, broker, _ = runningSimIn(t, t.TempDir(), extra...)
	return dashboard, broker
}

// runningSimIn is runningSim with dir as its --dir; it also returns the
// simulator's process id.
func runningSimIn(t *testing.T, dir string, extra ...string) (dashboard, broker string, pid int) {
	t.Helper()
	args := append([]string{"sim", "--mqtt", "127.0.0.1:0", "--http", "127.0.0.1:0", "--dir", dir}, extra...)
	cmd := exec.Command(binary, args...)
	lines, stderr := startLines(t, cmd)
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("gateway sim did not stop on SIGINT within 10s")
		}
	})
	dashRE := regexp.MustCompile(`dashboard: (http://\S+)`)
	brokerRE := regexp.MustCompile(`broker: +(tcp://\S+)`)
	deadline := time.After(40 * time.Second)
	for dashboard == "" || broker == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("gateway sim exited before it was ready:\n%s", stderr.String())
			}
			if m := dashRE.FindStringSubmatch(l); m != nil {
				dashboard = m[1]
			}
			if m := brokerRE.FindStringSubmatch(l); m != nil {
				broker = m[1]
			}
		case <-deadline:
			t.Fatalf("gateway sim not ready within 40s:\n%s", stderr.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	return dashboard, broker, cmd.Process.Pid
}

// startLines starts cmd and returns its stdout's lines, as they come, and
// its stderr, which fills until it ends.
func startLines(t *testing.T, cmd *exec.Cmd) (<-chan string, *strings.Builder) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := new(strings.Builder)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines, stderr
}

// Every scenario passes on its own: with no simulator reachable, the
// command starts one on free ports, plays, and exits 0 with a PASS line.
func TestScenariosStandalone(t *testing.T) {
	for _, name := range scenario.Names() {
		t.Run(name, func(t *testing.T) {
			out, code := runCLI(t, "sim", "scenario", name, "--sim", "http://127.0.0.1:1", "--delay", "0")
			if code != 0 || !strings.Contains(out, "PASS "+name) {
				t.Errorf("gateway sim scenario %s: exit %d\n%s", name, code, out)
			}
		})
	}
	out, code := runCLI(t, "sim", "scenario", "no-such-thing")
	if code != exitUsage || !strings.Contains(out, "paused-controller") {
		t.Errorf("unknown scenario: exit %d, want 2 and the list of scenarios\n%s", code, out)
	}
}

// Scenarios also play against a simulator that is already running, over its
// broker, and the gateway keeps its fences across them.
func TestScenariosAgainstRunningSim(t *testing.T) {
	dash, _ := runningSim(t)
	for _, name := range scenario.Names() {
		out, code := runCLI(t, "sim", "scenario", name, "--sim", dash, "--delay", "0")
		if code != 0 || !strings.Contains(out, "playing against the simulator") || !strings.Contains(out, "PASS "+name) {
			t.Errorf("gateway sim scenario %s --sim %s: exit %d\n%s", name, dash, code, out)
		}
	}
}

func TestSimPortTaken(t *testing.T) {
	_, broker := runningSim(t)
	taken := strings.TrimPrefix(broker, "tcp://")
	out, code := runCLI(t, "sim", "--mqtt", taken, "--http", "127.0.0.1:0", "--dir", t.TempDir())
	if code == 0 || !strings.Contains(out, "already in use") || !strings.Contains(out, "--broker tcp://"+taken) {
		t.Errorf("sim on a taken MQTT port: exit %d\n%s", code, out)
	}
}

// getJSON decodes the JSON answer to GET url into v and returns the
// status code.
func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %d, body not JSON: %v", url, resp.StatusCode, err)
	}
	return resp.StatusCode
}

// simFiles are the files of a simulator's directory that no other
// simulator may write: its configuration, store and latch.
var simFiles = []string{"gateway.yaml", "fence.db", "fence.db.pins"}

// TestSecondSimSameDir starts a second simulator on the directory of a
// running one, with ports of its own: it must stop at once and name the
// first one, and the first must not notice: its files unchanged, its
// gateway process not restarted, still taking commands.
func TestSecondSimSameDir(t *testing.T) {
	dir := t.TempDir()
	dashA, brokerA, pidA := runningSimIn(t, dir)
	ctl := testctl.Connect(t, brokerA, wire.Topics{GatewayID: "sim"})
	before := map[string][]byte{}
	for _, f := range simFiles {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		before[f] = b
	}
	var infoA sim.Info
	var statusA httpapi.Status
	getJSON(t, dashA+"/api/sim", &infoA)
	getJSON(t, dashA+"/api/status", &statusA)
	if infoA.GatewayPID == 0 || statusA.Started.IsZero() {
		t.Fatalf("simulator A: gateway pid %d, started %v; want both", infoA.GatewayPID, statusA.Started)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b := exec.CommandContext(ctx, binary, "sim", "--dir", dir, "--http", "127.0.0.1:0", "--mqtt", "127.0.0.1:0")
	start := time.Now()
	out, err := b.CombinedOutput()
	took := time.Since(start)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitConfig {
		t.Errorf("second simulator on %s: %v after %v, want exit %d\n%s", dir, err, took, exitConfig, out)
	}
	want := fmt.Sprintf("gateway: another simulator uses %s (pid %d, dashboard %s): stop it, or start this one with --dir ", dir, pidA, dashA)
	if !strings.HasPrefix(string(out), want) || strings.Count(string(out), "\n") != 1 {
		t.Errorf("second simulator says:\n%s\nwant one line starting %q", out, want)
	}
	if took > 10*time.Second {
		t.Errorf("second simulator took %v to refuse; want at once", took)
	}

	for _, f := range simFiles {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !bytes.Equal(got, before[f]) {
			t.Errorf("simulator A's %s changed (%v):\nbefore:\n%q\nafter:\n%q", f, err, before[f], got)
		}
	}
	var info sim.Info
	var status httpapi.Status
	getJSON(t, dashA+"/api/sim", &info)
	getJSON(t, dashA+"/api/status", &status)
	if info.GatewayPID != infoA.GatewayPID || info.LastExit != nil || info.Gateway != "online" || !status.Started.Equal(statusA.Started) {
		t.Errorf("simulator A's gateway: pid %d → %d, last exit %+v, status %q, started %v → %v; want the same process, online, never exited",
			infoA.GatewayPID, info.GatewayPID, info.LastExit, info.Gateway, statusA.Started, status.Started)
	}
	if res := ctl.Send(t, fence.Command{ID: fmt.Sprint("second-sim-", time.Now().UnixNano()), Actuator: "pump", Holder: "test",
		Fence: fence.Fence{Token: 7}, State: fence.StateOn}); res.Outcome != fence.Applied {
		t.Errorf("simulator A after the second one: command %v (%s), want applied", res.Outcome, res.Error)
	}
}

// get returns the status, content type and body of GET url.
func get(url string) (code int, ctype, body string, err error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b), err
}

// waitSimGateway waits until the simulator's gateway status (GET /api/sim)
// satisfies ok, and returns its Info.
func waitSimGateway(t *testing.T, dash, want string, ok func(string) bool) sim.Info {
	t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	for {
		var info sim.Info
		getJSON(t, dash+"/api/sim", &info)
		if ok(info.Gateway) {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("simulator's gateway is %q after 40s, want %s", info.Gateway, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// crashSimGateway makes the simulator's gateway process kill itself right
// after its next commit, and sends the command that commits.
func crashSimGateway(t *testing.T, dash string, ctl *testctl.Controller) {
	t.Helper()
	resp, err := http.Post(dash+"/api/sim/crash", "", nil)
	if err != nil {
		t.Fatalf("arm the crash point: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("arm the crash point: %s", resp.Status)
	}
	ctl.Publish(t, "pump", wire.EncodeCommand(fence.Command{ID: fmt.Sprint("crash-", time.Now().UnixNano()),
		Actuator: "pump", Holder: "test", Fence: fence.Fence{Token: uint64(time.Now().UnixNano())}, State: fence.StateOn}), false)
}

// stopSimGateway makes the simulator's gateway process stop for good: its
// store is replaced by an empty file, which the running process does not
// notice (it keeps the file it opened), and the process is crashed. The
// restart finds the empty store and exits 78, which the supervisor does
// not restart. It returns the simulator's Info once stopped.
func stopSimGateway(t *testing.T, dir, dash string, ctl *testctl.Controller) sim.Info {
	t.Helper()
	empty := filepath.Join(dir, "fence.db.empty")
	if err := os.WriteFile(empty, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(empty, filepath.Join(dir, "fence.db")); err != nil {
		t.Fatal(err)
	}
	crashSimGateway(t, dash, ctl)
	info := waitSimGateway(t, dash, "stopped: …", func(s string) bool { return strings.HasPrefix(s, "stopped: ") })
	if info.LastExit == nil || !strings.Contains(info.LastExit.Reason, "exit status 78") || !strings.Contains(info.LastExit.Reason, "store file is empty") {
		t.Fatalf("simulator's gateway stopped with last exit %+v, want exit status 78 and the empty store as the reason", info.LastExit)
	}
	return info
}

// TestSimGatewayUnavailable: while the simulator's gateway process does not
// answer, a browser gets a page that says what happened and reloads itself
// while the process restarts; once the process has stopped for good (a
// configuration error: exit 78), the page names the reason and the fix.
// /api/ requests get a JSON error. All with 502.
func TestSimGatewayUnavailable(t *testing.T) {
	dir := t.TempDir()
	dash, broker, _ := runningSimIn(t, dir)
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: "sim"})

	// A crash: the supervisor restarts the process after half a second.
	// Until it has seen the process end, the page cannot say why; from
	// then until the restart it must.
	crashSimGateway(t, dash, ctl)
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, ctype, body, err := get(dash + "/")
		if err == nil && code == http.StatusBadGateway {
			if !strings.HasPrefix(ctype, "text/html") || !strings.Contains(body, `http-equiv="refresh"`) || !strings.Contains(body, "--bg:") {
				t.Fatalf("while the gateway process does not answer, GET / = %d %s:\n%s\nwant a styled page that reloads itself", code, ctype, body)
			}
			if strings.Contains(body, "The gateway process is restarting") && strings.Contains(body, "signal: killed") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no page said the gateway process restarts after it was killed; the last: %d %v\n%s", code, err, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitSimGateway(t, dash, "online", func(s string) bool { return s == "online" })

	stopSimGateway(t, dir, dash, ctl)
	code, ctype, body, err := get(dash + "/")
	for _, want := range []string{"The gateway process has stopped", "exit status 78", "store file is empty", "To fix it:", "Ctrl-C", "--bg:"} {
		if !strings.Contains(body, want) {
			t.Errorf("GET / once stopped lacks %q", want)
		}
	}
	if err != nil || code != http.StatusBadGateway || !strings.HasPrefix(ctype, "text/html") || strings.Contains(body, `http-equiv="refresh"`) {
		t.Errorf("GET / once stopped = %d %s %v, want 502 text/html without a reload:\n%s", code, ctype, err, body)
	}
	code, ctype, body, err = get(dash + "/api/actuators")
	var e struct{ Error string }
	if err == nil {
		err = json.Unmarshal([]byte(body), &e)
	}
	if err != nil || code != http.StatusBadGateway || ctype != "application/json" ||
		!strings.Contains(e.Error, "the gateway process has stopped") || !strings.Contains(e.Error, "store file is empty") {
		t.Errorf("GET /api/actuators once stopped = %d %s %s (%v), want 502 and a JSON error that says it stopped and why", code, ctype, body, err)
	}
}

// TestSimGatewayStopsAtStart: a simulator whose gateway process stops with
// a configuration error as it starts (here: an emptied store) says why at
// once and exits 78, instead of waiting for it to come up.
func TestSimGatewayStopsAtStart(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fence.db"), nil, 0o640); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, code := runCLI(t, "sim", "--dir", dir, "--http", "127.0.0.1:0", "--mqtt", "127.0.0.1:0")
	if took := time.Since(start); code != exitConfig || !strings.Contains(out, "store file is empty") || took > 15*time.Second {
		t.Errorf("gateway sim on an emptied store: exit %d after %v, want %d at once with the reason:\n%s", code, took, exitConfig, out)
	}
}

// TestSimBrokerNotListening: a simulator given a --broker where nothing
// listens says so at once, as gateway run logs it, and exits 1, having
// created nothing (it waited 30 s, saying nothing, its dashboard silent).
func TestSimBrokerNotListening(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sim")
	port := testenv.Port(t) // reserved, and nothing listens there
	start := time.Now()
	out, code := runCLI(t, "sim", "--broker", fmt.Sprintf("tcp://127.0.0.1:%d", port), "--dir", dir, "--http", "127.0.0.1:0")
	want := fmt.Sprintf("gateway: --broker tcp://127.0.0.1:%d: connection refused: nothing listens at 127.0.0.1:%d (is the broker running? is the port right?)", port, port)
	if took := time.Since(start); code != exitFailure || !strings.Contains(out, want) || took > 10*time.Second {
		t.Errorf("gateway sim --broker to a closed port: exit %d after %v, want %d at once with %q:\n%s", code, took.Round(time.Millisecond), exitFailure, want, out)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("gateway sim created %s for a broker it cannot reach", dir)
	}
}

// TestSimExternalBroker: a simulator on a --broker that listens starts
// on it (the check that something listens there lets it by).
func TestSimExternalBroker(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	if _, got := runningSim(t, "--broker", broker); got != broker {
		t.Errorf("gateway sim --broker %s: its ready message names the broker %s", broker, got)
	}
}

// TestSimInterruptedAtStart: Ctrl-C while the simulator starts (here: its
// --broker accepts the connection and never answers) stops it quietly,
// exit 0, as Ctrl-C once it runs does; it printed "context canceled" as an
// error and exited 1.
func TestSimInterruptedAtStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	defer func() {
		for len(accepted) > 0 {
			(<-accepted).Close()
		}
	}()
	cmd := exec.Command(binary, "sim", "--broker", "tcp://"+ln.Addr().String(), "--dir", t.TempDir(), "--http", "127.0.0.1:0")
	var out testenv.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case c := <-accepted:
		accepted <- c
	case err := <-done:
		t.Fatalf("gateway sim exited (%v) before it connected to its broker:\n%s", err, out.String())
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("gateway sim did not connect to its --broker within 20s:\n%s", out.String())
	}
	cmd.Process.Signal(os.Interrupt)
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("gateway sim did not stop within 10s of SIGINT:\n%s", out.String())
	}
	if err != nil || strings.Contains(out.String(), "context canceled") {
		t.Errorf("gateway sim interrupted while it started: %v, want exit 0 and no error:\n%s", err, out.String())
	}
}
