package piimage

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/tests/testenv"
)

// TestScriptsParse: the build's and the image's shell scripts parse
// (bash -n, sh -n with dash, the image's /bin/sh); the image test runs them.
func TestScriptsParse(t *testing.T) {
	for _, s := range []struct{ shell, path string }{
		{"bash", "build.sh"}, {"bash", "customize.sh"},
		{"sh", "rootfs/usr/lib/fencegate-image/bootconfig"}, {"sh", "rootfs/usr/lib/fencegate-image/growroot"},
		{"sh", "rootfs/usr/lib/fencegate-image/fatcheck"}, {"sh", "rootfs/usr/lib/fencegate-image/netstatus"},
		// Sourced by bootconfig, not run: parsed, and not executable.
		{"sh", "rootfs/usr/lib/fencegate-image/shred.sh"}, {"sh", "rootfs/usr/lib/fencegate-image/wifi.sh"},
		{"sh", "rootfs/usr/lib/fencegate-image/site.sh"}, {"sh", "rootfs/usr/lib/fencegate-image/cardfiles.sh"},
	} {
		if out, err := exec.Command(s.shell, "-n", s.path).CombinedOutput(); err != nil {
			t.Errorf("%s -n %s: %v\n%s", s.shell, s.path, err, out)
		}
		if strings.HasSuffix(s.path, ".sh") && s.shell == "sh" {
			continue
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

// TestFATCheck: the boot's check of the FAT partition (fatcheck) leaves a
// cleanly unmounted one alone, and repairs one that Linux left marked
// dirty (a power cut while it was mounted), clearing the mark.
func TestFATCheck(t *testing.T) {
	mkfs := testenv.Program(t, "mkfs.vfat")
	testenv.Program(t, "fsck.fat")
	img := filepath.Join(t.TempDir(), "boot.img")
	if out, err := exec.Command(mkfs, "-n", "RASPIFIRM", "-F", "32", "-S", "512", "-s", "4", "-C", img, "262144").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.vfat: %v\n%s", err, out)
	}
	state := func() byte {
		b, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		return b[65]
	}
	check := func() string {
		out, err := exec.Command("sh", "rootfs/usr/lib/fencegate-image/fatcheck", img).CombinedOutput()
		if err != nil {
			t.Fatalf("fatcheck: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := check(); out != "" || state() != 0 {
		t.Fatalf("fatcheck of a clean FAT said %q, state %#x; want nothing, 0", out, state())
	}
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{1}, 65); err != nil { // as Linux marks a mounted FAT32
		t.Fatal(err)
	}
	f.Close()
	if out := check(); !strings.Contains(out, "not unmounted cleanly: checking it") || !strings.Contains(out, "dirty bit") || state() != 0 {
		t.Fatalf("fatcheck of a dirty FAT said %q, state %#x; want it checked and the mark cleared", out, state())
	}
}
