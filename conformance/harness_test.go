package conformance_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/client"
	"github.com/fencegate/fencegate/tests/testenv"
)

// bin holds the programs TestMain builds once: the gateway and the Go
// client's driver.
var bin struct{ gateway, godriver string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fencegate-conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.gateway, bin.godriver = filepath.Join(dir, "gateway"), filepath.Join(dir, "godriver")
	// The links are kept here (.gitignore ignores *.test) for the next run.
	for _, b := range []struct{ keep, out, pkg string }{
		{"gateway.test", bin.gateway, "../cmd/gateway"}, {"godriver.test", bin.godriver, "./godriver"},
	} {
		if err := testenv.GoBuild(b.keep, b.out, b.pkg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// A gateway is a gateway process (board sim) with its broker (Mosquitto)
// and an etcd, for the clients to command.
type gateway struct {
	ID, Broker, Etcd string
	Latch            string // the sim board's latch file: the outputs' levels
	Key              string // controller ctl-a's private key (PATH.key)
	Pins             map[string]string

	config, log string    // its configuration and log files
	proc        *exec.Cmd // the running gateway, nil when stopped
}

// startGateway starts a gateway with the actuators the clients' tests use
// (pump and valve in scopes of their own, fan and heater in scope
// climate, door taking commands signed by ctl-a) and those of extra, each
// in a scope of its own.
func startGateway(t *testing.T, extra ...string) *gateway {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the clients' tests run on Linux")
	}
	g := &gateway{ID: testenv.ID(t, "gw"), Broker: testenv.Mosquitto(t), Etcd: testenv.Etcd(t), Pins: map[string]string{}}
	dir := t.TempDir()
	keyBase := filepath.Join(dir, "ctl-a")
	if out, err := exec.Command(bin.gateway, "keygen", "--out", keyBase).CombinedOutput(); err != nil {
		t.Fatalf("gateway keygen: %v\n%s", err, out)
	}
	g.Key = keyBase + ".key"
	pub, err := os.ReadFile(keyBase + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	var acts strings.Builder
	pins := []int{17, 27, 22, 23, 24, 25, 5, 6, 12, 13, 16, 19, 20, 21, 26}
	add := func(name, more string) {
		if len(g.Pins) == len(pins) {
			t.Fatalf("more than %d actuators", len(pins))
		}
		gpio := fmt.Sprintf("GPIO%d", pins[len(g.Pins)])
		g.Pins[name] = gpio
		fmt.Fprintf(&acts, "  - {name: %s, pin: %s%s}\n", name, gpio, more)
	}
	add("pump", "")
	add("valve", "")
	add("fan", ", scope: climate")
	add("heater", ", scope: climate")
	add("door", ", require_signature: true")
	for _, name := range extra {
		add(name, "")
	}
	store := filepath.Join(dir, "fence.db")
	g.Latch = store + ".pins"
	cfg := fmt.Sprintf("id: %s\nmqtt: {broker: %s}\nstore: %s\nboard: sim\nhttp: \"\"\ncontrollers:\n  - {name: ctl-a, public_key: %q, scopes: [door]}\nactuators:\n%s",
		g.ID, g.Broker, store, strings.TrimSpace(string(pub)), acts.String())
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	g.config, g.log = path, filepath.Join(dir, "gateway.log")
	g.start(t, "--init")
	t.Cleanup(func() {
		if g.proc != nil {
			g.proc.Process.Kill()
			g.proc.Wait()
		}
		if t.Failed() {
			b, _ := os.ReadFile(g.log)
			t.Logf("gateway log:\n%s", b)
		}
	})
	return g
}

// start starts the gateway (with more flags, e.g. --init) and waits until
// it says it is online.
func (g *gateway) start(t *testing.T, more ...string) {
	t.Helper()
	cmd := exec.Command(bin.gateway, append([]string{"run", "--config", g.config, "--log-level", "warn"}, more...)...)
	log, err := os.OpenFile(g.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := testenv.StartChild(cmd); err != nil {
		t.Fatal(err)
	}
	g.proc = cmd
	g.waitStatus(t, "online")
}

// stop stops the gateway cleanly (SIGTERM): its retained status becomes
// offline, and its broker session keeps no subscription.
func (g *gateway) stop(t *testing.T) {
	t.Helper()
	g.proc.Process.Signal(syscall.SIGTERM)
	if err := g.proc.Wait(); err != nil {
		t.Fatalf("gateway stop: %v", err)
	}
	g.proc = nil
	g.waitStatus(t, "offline")
}

// dial connects a Go client to the gateway, for the test's own commands
// and reads, within ctx (30 s); done closes it.
func (g *gateway) dial(t *testing.T) (ctx context.Context, c *client.Client, done func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c, err := client.Dial(ctx, client.Options{Broker: g.Broker, GatewayID: g.ID})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return ctx, c, func() { c.Close(); cancel() }
}

func (g *gateway) waitStatus(t *testing.T, want string) {
	t.Helper()
	ctx, c, done := g.dial(t)
	defer done()
	if err := c.WaitStatus(ctx, want); err != nil {
		b, _ := os.ReadFile(g.log)
		t.Fatalf("gateway not %s: %v\n%s", want, err, b)
	}
}

// env is the environment the clients' own tests take the gateway from.
func (g *gateway) env() []string {
	return append(os.Environ(),
		"FENCEGATE_TEST_BROKER="+g.Broker,
		"FENCEGATE_TEST_ETCD="+g.Etcd,
		"FENCEGATE_TEST_GATEWAY="+g.ID,
		"FENCEGATE_TEST_KEY="+g.Key,
		"FENCEGATE_TEST_GATEWAY_BIN="+bin.gateway,
	)
}
