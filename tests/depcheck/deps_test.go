// Package depcheck holds the tests that keep fencegate's structure: the
// dependency direction (the fence decision free of MQTT and GPIO, the
// transport and the hardware depending on the core and never the reverse,
// the simulator's broker out of the path that `gateway run` takes and out
// of the benchmark, a configuration checked without a GPIO driver, the
// Raspberry Pi build (-tags nosim) without the simulator), and builds for
// the laptops the simulator runs on (macOS, Windows).
package depcheck

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const mod = "github.com/fencegate/fencegate/"

// deps returns the packages pkg imports, directly or not.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	return listDeps(t, nil, mod+pkg)
}

// listDeps returns the packages outside the standard library that
// `go list -deps args...` lists, with env added to the environment.
func listDeps(t *testing.T, env []string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath,Standard"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s go list -deps %s: %v", strings.Join(env, " "), strings.Join(args, " "), err)
	}
	var list []string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath string
			Standard   bool
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if !p.Standard {
			list = append(list, p.ImportPath)
		}
	}
	return list
}

func TestDependencyDirection(t *testing.T) {
	const (
		paho  = "github.com/eclipse/paho.mqtt.golang"
		bbolt = "go.etcd.io/bbolt"
		mochi = "github.com/mochi-mqtt/server"
		gpio  = "periph.io/"
		yaml  = "go.yaml.in/yaml"
		modb  = "github.com/simonvetter/modbus"
	)
	tests := []struct {
		pkg       string
		forbidden []string
	}{
		// The rule and the words: standard library only.
		{"fence", []string{paho, bbolt, mochi, gpio, yaml, mod}},
		// Modbus outputs: hardware, below the core; their description is
		// checked with the standard library only.
		{"modbusio", []string{paho, bbolt, mochi, gpio, yaml, mod + "fencelog", mod + "mqttlink", mod + "config", mod + "service", mod + "boards"}},
		{"modbusio/modbusconf", []string{paho, bbolt, mochi, gpio, yaml, modb, mod}},
		{"wire", []string{paho, bbolt, mochi, gpio, yaml, mod + "fencelog", mod + "actuator", mod + "boards"}},
		{"boards/pinmap", []string{paho, bbolt, mochi, gpio, yaml, mod}},
		// Signatures: the standard library and package fence only, so that
		// a controller can sign without the gateway's transport.
		{"sign", []string{paho, bbolt, mochi, gpio, yaml, mod + "wire", mod + "fencelog", mod + "actuator", mod + "boards", mod + "config", mod + "mqttlink", mod + "client"}},
		// The safety core: no transport, no hardware.
		{"fencelog", []string{paho, mochi, gpio, yaml, modb, mod + "mqttlink", mod + "wire", mod + "actuator", mod + "boards", mod + "modbusio"}},
		{"actuator", []string{paho, mochi, gpio, yaml, modb, mod + "mqttlink", mod + "wire", mod + "boards", mod + "config", mod + "modbusio"}},
		// The transport and the hardware depend on the core, never on each other.
		{"mqttlink", []string{bbolt, mochi, gpio, mod + "fencelog", mod + "actuator", mod + "boards"}},
		{"boards", []string{paho, mochi, yaml, mod + "mqttlink", mod + "wire", mod + "config", mod + "service"}},
		// Checking a configuration never loads a GPIO driver or a broker client.
		{"config", []string{paho, mochi, gpio, modb}},
		// The broker connection's security, read by config: no broker client.
		{"mqttsec", []string{paho, bbolt, mochi, gpio, yaml, mod}},
		{"httpapi", []string{paho, mochi, gpio}},
		{"metrics", []string{paho, mochi, gpio, mod + "mqttlink", mod + "boards"}},
		{"supervise", []string{paho, bbolt, mochi, gpio, yaml, mod}},
		{"hass", []string{paho, bbolt, mochi, gpio, yaml, mod + "fencelog", mod + "actuator", mod + "boards", mod + "mqttlink"}},
		// The Home Assistant bridge is a controller: no gateway internals.
		{"habridge", []string{bbolt, mochi, gpio, mod + "fencelog", mod + "actuator", mod + "boards", mod + "service", mod + "mqttlink"}},
		// The run path: everything `gateway run` uses. The embedded broker
		// and the simulator belong to the simulator only.
		{"service", []string{mochi, mod + "sim", mod + "scenario", mod + "mqttbroker", "go.etcd.io/etcd", mod + "lease"}},
		// The simulator runs the gateway as a child process, never in its own.
		{"sim", []string{mod + "service", mod + "mqttlink"}},
		{"scenario", []string{mochi, mod + "sim", mod + "mqttbroker", mod + "service", gpio}},
		// The benchmark runs the gateway as a child process too, and the
		// caller gives it a broker: it links neither the gateway's run
		// path nor the embedded broker, so the Raspberry Pi build
		// (-tags nosim) has gateway bench.
		{"bench", []string{mochi, gpio, mod + "service", mod + "mqttlink", mod + "sim", mod + "scenario", mod + "mqttbroker", mod + "httpapi"}},
		// Controllers' packages: no gateway internals.
		{"client", []string{bbolt, mochi, gpio, mod + "fencelog", mod + "actuator", mod + "boards", mod + "service", mod + "mqttlink"}},
		{"lease", []string{paho, bbolt, mochi, gpio, mod + "fencelog", mod + "actuator", mod + "service"}},
		// The image card's bridge file: text in, Mosquitto's configuration out.
		{"sitebridge", []string{paho, bbolt, mochi, gpio, yaml, modb, mod + "fencelog", mod + "actuator", mod + "boards", mod + "config", mod + "mqttlink", mod + "service"}},
	}
	// A positive control, so that an empty listing cannot pass.
	if got := strings.Join(deps(t, "service"), " "); !strings.Contains(got, paho) || !strings.Contains(got, bbolt) {
		t.Fatalf("deps of service = %s; want paho and bbolt among them", got)
	}
	for _, tt := range tests {
		for _, d := range deps(t, tt.pkg) {
			if d == mod+tt.pkg {
				continue
			}
			for _, f := range tt.forbidden {
				if strings.HasPrefix(d, f) {
					t.Errorf("%s depends on %s (forbidden: %s)", tt.pkg, d, f)
				}
			}
		}
	}
}

// TestGatewayNosim: the gateway built with -tags nosim, as make dist and
// make deb build it for the Raspberry Pi, links neither the simulator, nor
// the scenario player, nor the embedded broker; the default build, for
// laptops (make build, make sim), links all of them.
func TestGatewayNosim(t *testing.T) {
	simOnly := []string{mod + "sim", mod + "scenario", mod + "mqttbroker", "github.com/mochi-mqtt/server/v2"}
	for _, target := range []string{"linux/arm64", "linux/arm", "linux/amd64"} {
		goos, goarch, _ := strings.Cut(target, "/")
		env := []string{"CGO_ENABLED=0", "GOOS=" + goos, "GOARCH=" + goarch, "GOARM=6"}
		for _, tags := range []string{"", "nosim"} {
			got := map[string]bool{}
			for _, d := range listDeps(t, env, "-tags", tags, mod+"cmd/gateway") {
				got[d] = true
			}
			for _, p := range simOnly {
				if want := tags == ""; got[p] != want {
					t.Errorf("%s: gateway built with -tags %q links %s: %v, want %v", target, tags, p, got[p], want)
				}
			}
		}
	}
}

// TestCrossBuild builds every package, and links the gateway, for the
// laptops the simulator must run on: macOS (Intel and Apple silicon) and
// Windows. Only the sim board works there, but everything must build, so
// that `make sim` works on a clean clone of any of them, and the tests must
// compile (go vet), so that `make test` does too.
func TestCrossBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("cross builds take a while; not in -short")
	}
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	for _, target := range []string{"darwin/amd64", "darwin/arm64", "windows/amd64"} {
		goos, goarch, _ := strings.Cut(target, "/")
		t.Run(strings.ReplaceAll(target, "/", "-"), func(t *testing.T) {
			// One build both compiles every package and links every
			// command, the gateway among them, into bin: go build ./...
			// links them too, only to throw them away.
			bin := t.TempDir()
			for _, args := range [][]string{
				{"build", "-o", bin + string(filepath.Separator), "./..."},
				{"vet", "./..."},
			} {
				cmd := exec.Command("go", args...)
				cmd.Dir = strings.TrimSpace(string(root))
				cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("GOOS=%s GOARCH=%s go %s: %v\n%s", goos, goarch, strings.Join(args, " "), err, out)
				}
			}
			gateway := filepath.Join(bin, "gateway")
			if goos == "windows" {
				gateway += ".exe"
			}
			if _, err := os.Stat(gateway); err != nil {
				t.Errorf("GOOS=%s GOARCH=%s go build -o %s ./... linked no gateway: %v", goos, goarch, bin, err)
			}
		})
	}
}
