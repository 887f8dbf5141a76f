package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// floorGateway writes a configuration in a new directory and returns its
// path and the store's; nothing is created.
func floorGateway(t *testing.T, broker string) (cfg, store string) {
	t.Helper()
	dir := t.TempDir()
	cfg = writeConfig(t, dir, broker, "")
	return cfg, filepath.Join(dir, "fence.db")
}

// runGateway starts gateway run on cfg (never --init) and waits until it
// is online.
func runGateway(t *testing.T, broker, cfg string) *proc {
	t.Helper()
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: gatewayID(t)})
	p := startProc(t, nil, "run", "--config", cfg, "--log-level", "warn")
	ctl.WaitStatus(t, "online")
	return p
}

// TestInitNeedsFloorDecision: a store is never created
// without a decision about which tokens are already spent.
func TestInitNeedsFloorDecision(t *testing.T) {
	cfg, store := floorGateway(t, "tcp://127.0.0.1:1")
	for _, args := range [][]string{
		{},
		{"--floor", "5", "--new"},
		{"--new", "--floor-from-etcd", "http://127.0.0.1:1"},
		{"--floor", "-1"},
		{"--floor", "ten"},
		{"--floor", "9223372036854775808"},
	} {
		out, code := runCLI(t, append([]string{"init", "--config", cfg}, args...)...)
		if code != exitUsage || !strings.Contains(out, "--floor") {
			t.Errorf("init %v: exit %d, want %d and what to give:\n%s", args, code, exitUsage, out)
		}
		if _, err := os.Lstat(store); err == nil {
			t.Fatalf("init %v created %s", args, store)
		}
	}
	// etcd unreachable: nothing is created either.
	if out, code := runCLI(t, "init", "--config", cfg, "--floor-from-etcd", "http://127.0.0.1:1"); code == 0 || !strings.Contains(out, "Nothing was created") {
		t.Errorf("init --floor-from-etcd with no etcd: exit %d, want a failure:\n%s", code, out)
	}
	if _, err := os.Lstat(store); err == nil {
		t.Fatalf("init with an unreachable etcd created %s", store)
	}

	// run without a store refuses, and says exactly what to run.
	out, code := runCLI(t, "run", "--config", cfg)
	abs, _ := filepath.Abs(cfg)
	for _, want := range []string{"does not exist", "init --config " + abs + " --floor-from-etcd", "init --config " + abs + " --floor N", "init --config " + abs + " --new"} {
		if code != exitConfig || !strings.Contains(out, want) {
			t.Errorf("run without a store: exit %d, want %d and %q:\n%s", code, exitConfig, want, out)
		}
	}
	if out, code := runCLI(t, "check", "--config", cfg); code != exitConfig || !strings.Contains(out, "init --config "+abs+" --new") {
		t.Errorf("check without a store: exit %d, want %d and the init commands:\n%s", code, exitConfig, out)
	}
	if _, err := os.Lstat(store); err == nil {
		t.Fatalf("run without --init created %s", store)
	}
}

// TestInitFloor: with --floor N every token up to N is stale in every
// scope, the store says so, and the first token above it is applied.
func TestInitFloor(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	cfg, store := floorGateway(t, broker)
	if out, code := runCLI(t, "init", "--config", cfg, "--floor", "100"); code != 0 || !strings.Contains(out, "every token up to 100 is stale") {
		t.Fatalf("init --floor 100: exit %d\n%s", code, out)
	}
	if out, code := runCLI(t, "init", "--config", cfg, "--new"); code != exitFailure || !strings.Contains(out, "already exists") {
		t.Fatalf("init over an existing store: exit %d, want %d\n%s", code, exitFailure, out)
	}
	out, code := runCLI(t, "inspect", "--store", store)
	var ins struct {
		Floor    uint64 `json:"floor"`
		FloorWhy string `json:"floor_why"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &ins) != nil || ins.Floor != 100 || ins.FloorWhy != "--floor 100" {
		t.Fatalf("inspect: exit %d, floor %d %q, want 100 \"--floor 100\"\n%s", code, ins.Floor, ins.FloorWhy, out)
	}

	runGateway(t, broker, cfg)
	send := func(actuator string, token, seq int, state string) (string, int) {
		return runCLI(t, "send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", actuator,
			"--token", strconv.Itoa(token), "--seq", strconv.Itoa(seq), "--timeout", "10s", state)
	}
	for _, c := range []struct {
		actuator   string
		token, seq int
		state      string
		code       int
		want       string
	}{
		{"pump", 41, 0, "on", exitStale, "floor 100"},
		{"pump", 100, 7, "on", exitStale, "floor 100"},
		{"heater", 100, 0, "fence", exitStale, "floor 100"},
		{"pump", 101, 0, "on", 0, `"outcome":"applied"`},
		{"fan", 101, 0, "on", 0, `"outcome":"applied"`},
	} {
		out, code := send(c.actuator, c.token, c.seq, c.state)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("send %s token %d seq %d %s: exit %d, want %d and %q\n%s", c.actuator, c.token, c.seq, c.state, code, c.code, c.want, out)
		}
	}
}

// TestStoreRecreatedFromEtcd: a store lost and
// recreated with --floor-from-etcd refuses a token the old store had
// accepted, so a paused controller's old token cannot win again; with
// --new (the wrong decision here) the same token would be applied.
func TestStoreRecreatedFromEtcd(t *testing.T) {
	etcd := testenv.Etcd(t)
	broker := testenv.EmbeddedBroker(t)
	cfg, store := floorGateway(t, broker)
	if out, code := runCLI(t, "init", "--config", cfg, "--new"); code != 0 {
		t.Fatalf("init --new: exit %d\n%s", code, out)
	}
	p := runGateway(t, broker, cfg)
	out, code := runCLI(t, "send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", "pump", "--etcd", etcd, "--ttl", "5", "on")
	m := regexp.MustCompile(`granted token (\d+)`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("send --etcd: exit %d\n%s", code, out)
	}
	token := m[1]

	// The SD card is replaced: the store is gone.
	p.kill()
	for _, f := range []string{store, store + ".pins"} {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	out, code = runCLI(t, "init", "--config", cfg, "--floor-from-etcd", etcd)
	m = regexp.MustCompile(`every token up to (\d+) is stale \(--floor-from-etcd `).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("init --floor-from-etcd: exit %d\n%s", code, out)
	}
	if floor, _ := strconv.ParseUint(m[1], 10, 64); fmt.Sprint(floor) == "0" || floor < mustUint(t, token) {
		t.Fatalf("floor %d is below the token %s etcd already issued", floor, token)
	}
	runGateway(t, broker, cfg)
	// The paused controller wakes with the token the old store accepted.
	out, code = runCLI(t, "send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", "pump", "--token", token, "--id", testenv.ID(t, "late"), "on")
	if code != exitStale || !strings.Contains(out, "floor") {
		t.Errorf("the old token %s on the recreated store: exit %d, want stale (%d)\n%s", token, code, exitStale, out)
	}
	// A new grant from etcd passes.
	out, code = runCLI(t, "send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", "pump", "--etcd", etcd, "--ttl", "5", "off")
	if code != 0 || !strings.Contains(out, `"outcome":"applied"`) {
		t.Errorf("a new grant on the recreated store: exit %d\n%s", code, out)
	}
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMaxTokenJump: with max_token_jump a forged token
// at the end of the range is rejected, fence-only or not, and the fence
// stays where it was: legitimate controllers keep working.
func TestMaxTokenJump(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	dir := t.TempDir()
	cfg := writeConfigWith(t, dir, gatewayID(t), broker, "", `actuators:
  - {name: pump, pin: GPIO17}
  - {name: fan, pin: GPIO22}
scopes:
  - name: pump
    max_token_jump: 1000
`)
	if out, code := runCLI(t, "init", "--config", cfg, "--floor", "5000"); code != 0 {
		t.Fatalf("init: exit %d\n%s", code, out)
	}
	runGateway(t, broker, cfg)
	send := func(actuator, token, state string) (string, int) {
		return runCLI(t, "send", "--broker", broker, "--gateway", gatewayID(t), "--actuator", actuator, "--token", token, "--timeout", "10s", state)
	}
	for _, c := range []struct {
		actuator, token, state string
		code                   int
		want                   string
	}{
		{"pump", "9223372036854775807", "on", exitRejected, `"reason":"token-jump"`},
		{"pump", "9223372036854775807", "fence", exitRejected, `"reason":"token-jump"`},
		{"pump", "6001", "on", exitRejected, `"fence":{"token":5000,"seq":0}`},
		{"pump", "6000", "on", 0, `"outcome":"applied"`},
		{"pump", "7001", "off", exitRejected, "max_token_jump is 1000"},
		{"pump", "7000", "off", 0, `"outcome":"applied"`},
		// A scope without the guard takes any token above its fence.
		{"fan", "9223372036854775807", "on", 0, `"outcome":"applied"`},
	} {
		out, code := send(c.actuator, c.token, c.state)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("send %s --token %s %s: exit %d, want %d and %q\n%s", c.actuator, c.token, c.state, code, c.code, c.want, out)
		}
	}
}
