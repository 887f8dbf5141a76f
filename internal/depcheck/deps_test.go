// Package depcheck holds the test that keeps fencegate's dependency
// direction: the fence decision free of MQTT and GPIO, the transport and
// the hardware depending on the core and never the reverse, and the
// simulator's broker out of the path that `gateway run` takes.
package depcheck

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/fencegate/fencegate/"

// deps returns the packages pkg imports, directly or not.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard", mod+pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
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
	)
	tests := []struct {
		pkg       string
		forbidden []string
	}{
		{"fence", []string{paho, bbolt, mochi, gpio, yaml, mod}}, // standard library only (and itself)
		{"fencelog", []string{paho, mochi, gpio, yaml, mod + "mqttlink", mod + "actuator", mod + "boards"}},
		{"actuator", []string{paho, mochi, gpio, yaml, mod + "mqttlink", mod + "boards"}},
		{"mqttlink", []string{bbolt, mochi, gpio, mod + "fencelog", mod + "actuator", mod + "boards"}},
		{"boards", []string{paho, bbolt, mochi, mod + "fencelog", mod + "mqttlink", mod + "actuator"}},
		{"httpapi", []string{paho, mochi, gpio}},
		// The run path: everything `gateway run` uses. The embedded broker
		// belongs to the simulator only.
		{"service", []string{mochi, mod + "sim", mod + "mqttbroker", "go.etcd.io/etcd", mod + "lease"}},
		// Controllers' packages: no gateway internals.
		{"client", []string{bbolt, mochi, gpio, mod + "fencelog", mod + "actuator", mod + "boards", mod + "service"}},
		{"lease", []string{paho, bbolt, mochi, gpio, mod + "fencelog", mod + "actuator", mod + "service"}},
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
