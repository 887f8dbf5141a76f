package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// gatewayProc starts a gateway process on the sim board against broker and
// waits until it takes commands. It returns the latch file; the API is on
// apiAddr(latch).
func gatewayProc(t *testing.T, broker string) string {
	t.Helper()
	_, latch := gatewayProcess(t, broker)
	return latch
}

// gatewayProcess is gatewayProc that also returns the process.
func gatewayProcess(t *testing.T, broker string) (*proc, string) {
	t.Helper()
	dir := t.TempDir()
	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.Port(t))
	os.WriteFile(filepath.Join(dir, "api"), []byte(httpAddr), 0o644)
	cfg := writeConfig(t, dir, broker, httpAddr)
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: gatewayID(t)})
	p := startProc(t, nil, "run", "--config", cfg, "--init", "--log-level", "warn")
	ctl.WaitStatus(t, "online")
	waitAPI(t, httpAddr, p)
	return p, filepath.Join(dir, "fence.db.pins")
}

// apiAddr returns the API address of the gateway started by gatewayProc.
func apiAddr(latch string) string {
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(latch), "api"))
	return string(b)
}

func TestSendExitCodes(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	latch := gatewayProc(t, broker)
	send := func(args ...string) (string, int) {
		return runCLI(t, append([]string{"send", "--broker", broker, "--gateway", gatewayID(t), "--timeout", "5s"}, args...)...)
	}
	s1 := testenv.ID(t, "s1")
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--actuator", "pump", "--token", "42", "--id", s1, "on"}, 0, `"outcome":"applied"`},
		{[]string{"--actuator", "pump", "--token", "42", "--id", s1, "on"}, 0, `"outcome":"duplicate"`},
		{[]string{"--actuator", "pump", "--token", "41", "off"}, exitStale, `"outcome":"stale"`},
		{[]string{"--actuator", "nope", "--token", "50", "off"}, exitRejected, `unknown actuator`},
		{[]string{"--actuator", "pump", "--token", "50", "fence"}, 0, `"fence":{"token":50,"seq":0}`},
		{[]string{"--actuator", "pump", "--token", "49", "--seq", "7", "off"}, exitStale, `below the fence 50/0`},
		{[]string{"--gateway", testenv.ID(t, "absent"), "--actuator", "pump", "--token", "60", "--timeout", "300ms", "on"}, exitTimeout, "no answer"},
		{[]string{"--actuator", "pump", "on"}, exitUsage, "--token"},
		{[]string{"--actuator", "pump", "--token", "9223372036854775808", "on"}, exitUsage, "2^63-1"},
		{[]string{"--actuator", "pump", "--token", "5", "toggle"}, exitUsage, "on, off, fence, pulse, duty or reset"},
	}
	for _, tt := range tests {
		out, code := send(tt.args...)
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("gateway send %v: exit %d, want %d with %q:\n%s", tt.args, code, tt.code, tt.want, out)
		}
	}
	if m, _ := boards.ReadLatch(latch); !m["GPIO17"] {
		t.Error("pump latch low: the applied command did not drive it, or a later one did")
	}
}

// TestSendErrorTexts: what gateway send says when it cannot do what it
// was asked, as a new user meets it: the reason a broker refused, as
// gateway run logs it; a bad flag value, what it should be, and a hint,
// not the whole usage; a broker URL without its scheme, or with another
// protocol's, and what to write; an actuator the gateway does not have,
// and the names of those it has, at once, also with --etcd (before any
// lease is taken).
func TestSendErrorTexts(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	gatewayProc(t, broker)
	gw := gatewayID(t)
	hostPort := strings.TrimPrefix(broker, "tcp://")
	unknown := fmt.Sprintf(`no actuator "pmup" on gateway %q; its actuators are fan, heater, pump`, gw)
	const hint = "\nRun gateway send -h for the usage.\n"
	for _, tt := range []struct {
		args  []string
		code  int
		want  string
		lines int // of output at most; 0: any
	}{
		{[]string{"--broker", "tcp://127.0.0.1:1", "--actuator", "pump", "--token", "20", "on"}, exitFailure,
			"connection refused: nothing listens at 127.0.0.1:1 (is the broker running? is the port right?)", 1},
		{[]string{"--broker", hostPort, "--actuator", "pump", "--token", "20", "on"}, exitUsage,
			fmt.Sprintf("gateway: --broker %q: no scheme: want tcp://HOST:PORT: write tcp://%s (or ssl://%s for TLS)", hostPort, hostPort, hostPort) + hint, 2},
		{[]string{"--broker", "http://" + hostPort, "--actuator", "pump", "--token", "20", "on"}, exitUsage,
			fmt.Sprintf(`gateway: --broker "http://%s": scheme "http": want tcp://HOST:PORT, or ssl://HOST:PORT for TLS`, hostPort), 2},
		{[]string{"--broker", "tcp://", "--actuator", "pump", "--token", "20", "on"}, exitUsage,
			`gateway: --broker "tcp://": no host: want tcp://HOST:PORT`, 2},
		{[]string{"--actuator", "pump", "--token", "abc", "on"}, exitUsage, `invalid value "abc" for flag -token: want a whole number from 1 to 2^63-1` + hint, 2},
		{[]string{"--actuator", "pump", "--token", "0", "on"}, exitUsage, `invalid value "0" for flag -token: want a whole number from 1 to 2^63-1` + hint, 2},
		{[]string{"--actuator", "pump", "--token", "1", "--seq", "-1", "on"}, exitUsage, `invalid value "-1" for flag -seq: want a whole number from 0 to 2^63-1` + hint, 2},
		{[]string{"--actuator", "pump", "--token", "1", "toggle"}, exitUsage, `gateway: state "toggle": want on, off, fence, pulse, duty or reset` + hint, 2},
		{[]string{"--actuator", "pump", "on"}, exitUsage, "gateway: give either --token N (1 to 2^63-1) or --etcd URL" + hint, 2},
		{[]string{"--actuator", "pmup", "--token", "20", "on"}, exitRejected, "gateway: " + unknown + "\n", 2},
		// etcd is not there: nothing may be asked of it.
		{[]string{"--actuator", "pmup", "--etcd", "http://127.0.0.1:1", "on"}, exitRejected, "gateway: " + unknown + "\n", 1},
		// A known actuator, and etcd is not there: said at once (it
		// waited 60 s whatever --timeout said, then "context deadline
		// exceeded"), without the etcd client's JSON warnings.
		{[]string{"--actuator", "pump", "--etcd", "http://127.0.0.1:1", "on"}, exitFailure,
			"gateway: etcd http://127.0.0.1:1: connection refused: nothing listens at 127.0.0.1:1 (is etcd running? is the URL right?)\n", 1},
		{[]string{"--actuator", "pump", "--etcd", "127.0.0.1:1", "on"}, exitUsage,
			`gateway: --etcd "127.0.0.1:1": want etcd's client URL, http://HOST:PORT (or https://), e.g. http://127.0.0.1:2379; several, comma-separated` + hint, 2},
		{[]string{"--actuator", "pump", "--token", "1", "--timeout", "0s", "on"}, exitUsage, "gateway: --timeout 0s: want a positive duration, e.g. 10s" + hint, 2},
		{[]string{"--actuator", "pump", "--token", "1", "--timeout", "-1s", "on"}, exitUsage, "gateway: --timeout -1s: want a positive duration", 2},
		{[]string{"--actuator", "pump", "--etcd", "http://127.0.0.1:1", "--ttl", "0", "on"}, exitUsage, "gateway: --ttl 0: want whole seconds, at least 1", 2},
	} {
		start := time.Now()
		out, code := runCLI(t, append([]string{"send", "--broker", broker, "--gateway", gw}, tt.args...)...)
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("gateway send %v took %v, want an answer at once (the timeout is 10s)", tt.args, took.Round(time.Millisecond))
		}
		if code != tt.code || !strings.Contains(out, tt.want) || (tt.lines > 0 && strings.Count(out, "\n") > tt.lines) {
			t.Errorf("gateway send %v: exit %d, want %d, and at most %d lines with %q:\n%s", tt.args, code, tt.code, tt.lines, tt.want, out)
		}
	}
}

// TestBrokerFlag: every command that takes --broker checks it by the rule
// of the configuration's mqtt.broker (one rule, mqttsec.BrokerURL): a URL
// without its scheme or with another protocol's is refused before
// anything starts, saying what to write, with the hint to the usage; one
// without a port takes its scheme's (1883 for tcp://), as the Python
// client does.
func TestBrokerFlag(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"send", "--gateway", "gw", "--actuator", "pump", "--token", "5", "on"},
		{"ha-bridge", "--gateway", "gw", "--etcd", "http://127.0.0.1:1", "--actuators", "pump"},
		{"sim", "--dir", filepath.Join(dir, "sim"), "--http", "127.0.0.1:0", "--mqtt", "127.0.0.1:0"},
		{"bench", "--profile", "single", "--store-dir", filepath.Join(dir, "bench")},
	} {
		for bad, want := range map[string]string{
			"127.0.0.1:1":    `--broker "127.0.0.1:1": no scheme: want tcp://HOST:PORT: write tcp://127.0.0.1:1`,
			"http://h:1883":  `--broker "http://h:1883": scheme "http": want tcp://HOST:PORT`,
			"tcp://h:65536":  `--broker "tcp://h:65536": port 65536 is not a port (1 to 65535)`,
			"ftp://u:pw@h:1": `--broker "ftp://u:xxxxx@h:1": scheme "ftp"`,
		} {
			argv := append(append([]string{}, args...), "--broker", bad)
			out, code := runCLI(t, argv...)
			hint := "\nRun gateway " + args[0] + " -h for the usage.\n"
			if code != exitUsage || !strings.Contains(out, "gateway: "+want) || !strings.HasSuffix(out, hint) || strings.Contains(out, "u:pw@") {
				t.Errorf("gateway %s: exit %d, want %d: %q and the hint to -h, without the password:\n%s", strings.Join(argv, " "), code, exitUsage, want, out)
			}
		}
		for _, p := range []string{filepath.Join(dir, "sim"), filepath.Join(dir, "bench")} {
			if _, err := os.Stat(p); err == nil {
				t.Fatalf("gateway %s with a bad --broker created %s", args[0], p)
			}
		}
	}
	// Without a port: 1883, not "missing port". (Unless something listens
	// there on this machine, nothing does, and send says so.)
	if c, err := net.DialTimeout("tcp", "127.0.0.1:1883", time.Second); err == nil {
		c.Close()
		t.Skip("something listens at 127.0.0.1:1883: the default port is not tested")
	}
	out, code := runCLI(t, "send", "--broker", "tcp://127.0.0.1", "--gateway", "gw", "--actuator", "pump", "--token", "5", "on")
	if code != exitFailure || !strings.Contains(out, "nothing listens at 127.0.0.1:1883") {
		t.Errorf("gateway send --broker tcp://127.0.0.1: exit %d, want %d, connecting to port 1883:\n%s", code, exitFailure, out)
	}
}

// TestSendPublishesOnce: gateway send publishes its command once to a
// gateway that stays online (the retained online status it receives when
// it subscribes is no reason to resend): the audit trail has no copy
// answered duplicate.
func TestSendPublishesOnce(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	latch := gatewayProc(t, broker)
	for i := range 5 {
		out, code := runCLI(t, "send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", "pump", "--token", fmt.Sprint(10+i), "on")
		if code != 0 || !strings.Contains(out, `"outcome":"applied"`) {
			t.Fatalf("gateway send: exit %d\n%s", code, out)
		}
	}
	// The gateway decides a scope's commands in the order they came: a
	// later command's answer comes after every copy of the earlier ones.
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: gatewayID(t)})
	if res := ctl.Send(t, fence.Command{ID: testenv.ID(t, "last"), Actuator: "pump", Fence: fence.Fence{Token: 20}}); res.Outcome != fence.Applied {
		t.Fatalf("the last command: %s %s", res.Outcome, res.Error)
	}
	for _, e := range auditOf(t, apiAddr(latch)) {
		if e.Outcome == fence.Duplicate {
			t.Errorf("audit trail: %s %s under %s: gateway send published a command more than once", e.Outcome, e.ID, e.Command)
		}
	}
}

var grantedRE = regexp.MustCompile(`granted token (\d+)`)

// processState returns the state letter of a process from /proc (T when
// stopped).
func processState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return ""
}

// TestPausedControllerWithEtcd is the seed's failure, for real: two
// controller processes contend for the same etcd lock with a short lease.
// A acquires and stops itself with SIGSTOP right after the grant, before its
// publish; its lease expires; B acquires a higher token and commits; A gets
// SIGCONT and publishes. A must be answered stale and the latch must show
// B's state, every time.
func TestPausedControllerWithEtcd(t *testing.T) {
	t.Parallel() // long (20 leases run out); nothing shared with the other tests
	etcd := testenv.Etcd(t)
	broker := testenv.EmbeddedBroker(t)
	latch := gatewayProc(t, broker)
	base := []string{"send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", "pump", "--etcd", etcd, "--ttl", "2"}
	const reps = 20
	for i := range reps {
		stateB, stateA := "off", "on"
		if i%2 == 1 {
			stateB, stateA = "on", "off"
		}
		// A: granted, then paused before its publish (it stops itself; the
		// helper waits for the kernel to say so, however long that takes).
		a := startStoppedSend(t, append(base, "--holder", "controller-a", "--id", testenv.ID(t, fmt.Sprint("a", i)), stateA)...)
		tokA := a.token

		// B: waits for the lock until A's lease expires, then commits.
		out, code := runCLI(t, append(base, "--holder", "controller-b", "--id", testenv.ID(t, fmt.Sprint("b", i)), "--timeout", "30s", stateB)...)
		if code != 0 || !strings.Contains(out, `"outcome":"applied"`) {
			t.Fatalf("rep %d: B: exit %d\n%s", i, code, out)
		}
		m := grantedRE.FindStringSubmatch(out)
		tokB, _ := strconv.ParseUint(m[1], 10, 64)
		if tokB <= tokA {
			t.Errorf("rep %d: B's token %d is not above A's %d", i, tokB, tokA)
		}

		// A wakes up and publishes its old command.
		aOut, code := a.resume(t)
		if code != exitStale || !strings.Contains(aOut, `"outcome":"stale"`) {
			t.Fatalf("rep %d: A (token %d, after B's %d): exit %d, want %d (stale)\n%s", i, tokA, tokB, code, exitStale, aOut)
		}
		if !strings.Contains(aOut, fmt.Sprintf(`"fence":{"token":%d`, tokB)) {
			t.Errorf("rep %d: A's stale answer does not carry B's fence %d: %s", i, tokB, aOut)
		}
		lm, _ := boards.ReadLatch(latch)
		if lm["GPIO17"] != (stateB == "on") {
			t.Fatalf("rep %d: pump latch high=%v, want B's state %s", i, lm["GPIO17"], stateB)
		}
	}
}

// lineWatcher collects a process's output lines and waits for patterns.
type lineWatcher struct {
	lines chan string
	all   []string
}

func watch(t *testing.T, cmd *exec.Cmd) *lineWatcher {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	w := &lineWatcher{lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
	}()
	return w
}

func (w *lineWatcher) wait(t *testing.T, re *regexp.Regexp, d time.Duration) []string {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case l, ok := <-w.lines:
			if !ok {
				t.Fatalf("process ended before %q:\n%s", re, strings.Join(w.all, "\n"))
			}
			w.all = append(w.all, l)
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no line matching %q within %v:\n%s", re, d, strings.Join(w.all, "\n"))
		}
	}
}

// The example controller, as users will copy it: two instances contend for
// one actuator; the active one is paused (SIGSTOP) past its lease; the other
// takes over with a higher token; the paused one, continued, recovers
// without ever getting a command applied under its old token.
func TestExampleController(t *testing.T) {
	etcd := testenv.Etcd(t)
	broker := testenv.EmbeddedBroker(t)
	latch := gatewayProc(t, broker)
	start := func(name string) (*exec.Cmd, *lineWatcher) { return startExampleCtl(t, etcd, broker, "pump", name) }
	granted, applied := ctlGranted, ctlApplied
	a, wa := start("ctl-a")
	tokA, _ := strconv.ParseUint(wa.wait(t, granted, 60*time.Second)[1], 10, 64)
	wa.wait(t, applied, 60*time.Second)
	_, wb := start("ctl-b")
	wb.wait(t, ctlWaiting, 60*time.Second)

	if err := testenv.Pause(a.Process); err != nil {
		t.Skip(err)
	}
	tokB, _ := strconv.ParseUint(wb.wait(t, granted, 60*time.Second)[1], 10, 64)
	if tokB <= tokA {
		t.Fatalf("B's token %d is not above A's %d", tokB, tokA)
	}
	m := wb.wait(t, applied, 10*time.Second)
	if tb, _ := strconv.ParseUint(m[2], 10, 64); tb != tokB {
		t.Fatalf("B applied under token %s, want %d", m[2], tokB)
	}
	testenv.Resume(a.Process)
	// A recovers: its old token is refused (stale) or it sees the lost lease
	// first; either way it goes back to waiting for the lock.
	wa.wait(t, regexp.MustCompile(`stale; rereading state|lease lost`), 20*time.Second)
	wa.wait(t, regexp.MustCompile(`waiting for the lock`), 20*time.Second)
	wb.wait(t, applied, 10*time.Second) // B keeps acting
	// The invariant, from the gateway's own audit trail: once B's token was
	// applied, nothing under a lower token was applied again.
	sawB := false
	for _, e := range auditOf(t, apiAddr(latch)) {
		if e.Outcome != fence.Applied {
			continue
		}
		if e.Command.Token == tokB {
			sawB = true
		} else if sawB && e.Command.Token < tokB {
			t.Errorf("applied under token %d (holder %s) after B's token %d", e.Command.Token, e.Holder, tokB)
		}
	}
	if !sawB {
		t.Errorf("no applied command under B's token %d in the audit trail", tokB)
	}
}
