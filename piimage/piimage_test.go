package piimage

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fencegate/fencegate/config"
)

// TestScriptsParse: the build's and the image's shell scripts parse
// (bash -n, sh -n with dash, the image's /bin/sh); the image test runs them.
func TestScriptsParse(t *testing.T) {
	for _, s := range []struct{ shell, path string }{
		{"bash", "build.sh"}, {"bash", "customize.sh"},
		{"sh", "rootfs/usr/lib/fencegate-image/bootconfig"}, {"sh", "rootfs/usr/lib/fencegate-image/growroot"},
	} {
		if out, err := exec.Command(s.shell, "-n", s.path).CombinedOutput(); err != nil {
			t.Errorf("%s -n %s: %v\n%s", s.shell, s.path, err, out)
		}
		if st, err := os.Stat(s.path); err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("%s is not executable (%v)", s.path, err)
		}
	}
}

// TestCardExample: the gateway.yaml.example the image puts on the card is a
// valid configuration for the image's broker and store.
func TestCardExample(t *testing.T) {
	path := filepath.Join("card", "gateway.yaml.example")
	cfg, err := config.LoadWithoutFiles(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if cfg.MQTT.Broker != "tcp://127.0.0.1:1883" || cfg.MQTT.Username != "gateway" || cfg.MQTT.PasswordFile != "/etc/fencegate/mqtt.password" ||
		cfg.Store != "/var/lib/fencegate/fence.db" || cfg.Board != "raspberry-pi" {
		t.Errorf("%s does not fit the image (its broker, its password file, its store, the Pi's board): %+v", path, cfg)
	}
}
