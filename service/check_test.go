package service_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/config"
	"github.com/fencegate/fencegate/fencelog"
	"github.com/fencegate/fencegate/service"
	"github.com/fencegate/fencegate/tests/testenv"
)

func checkConfig(t *testing.T, store string) *config.Config {
	t.Helper()
	cfg, err := config.Parse(fmt.Appendf(nil, "id: chk\nmqtt: {broker: tcp://127.0.0.1:1}\nstore: %s\nboard: sim\nhttp: \"127.0.0.1:0\"\nactuators:\n  - {name: pump, pin: GPIO17}\n", store))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// failed returns the findings with an error.
func failed(fs []service.Finding) []service.Finding {
	var out []service.Finding
	for _, f := range fs {
		if f.Err != nil {
			out = append(out, f)
		}
	}
	return out
}

// readOnlyDir returns a directory this process cannot write: a read-only
// mount as root (root writes anywhere else), mode 0555 otherwise.
func readOnlyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return dir
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		testenv.Need(t, false, "mount a read-only tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

// TestCheckIsRun: gateway check reports exactly what
// run would do. Where run fails (no store without --init, a store directory
// that is read-only or not a real filesystem) check fails, at the same
// step, and run fails the same way; where run would start, check passes.
func TestCheckIsRun(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		store string
		init  bool
		step  string
		want  error
	}{
		{"no store", filepath.Join(t.TempDir(), "fence.db"), false, "store", fencelog.ErrNotExist},
		{"read-only directory", filepath.Join(readOnlyDir(t), "fence.db"), true, "store directory", service.ErrStoreDir},
		{"not a real filesystem", "/proc/fencegate/fence.db", true, "store directory", service.ErrStoreDir},
		{"no store, with --init", filepath.Join(t.TempDir(), "sub", "fence.db"), true, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := checkConfig(t, tt.store)
			fails := failed(service.Check(ctx, cfg, service.CheckOptions{Init: tt.init}))
			if tt.want == nil {
				if len(fails) != 0 {
					t.Errorf("Check = %+v, want no failure", fails)
				}
				if _, err := os.Stat(tt.store); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("Check created the store (%v)", err)
				}
				return
			}
			if len(fails) != 1 || fails[0].Step != tt.step || !errors.Is(fails[0].Err, tt.want) {
				t.Errorf("Check failures = %+v, want one at %q: %v", fails, tt.step, tt.want)
			}
			if runErr := service.Run(ctx, cfg, service.Options{Init: tt.init}); !errors.Is(runErr, tt.want) {
				t.Errorf("Run = %v, want %v (check must say what run does)", runErr, tt.want)
			}
		})
	}

	// A store on tmpfs works, but is lost at every reboot: a warning.
	if os.Geteuid() == 0 {
		dir := testenv.SmallFS(t, "1m")
		fs := service.Check(ctx, checkConfig(t, filepath.Join(dir, "fence.db")), service.CheckOptions{Init: true})
		var warned bool
		for _, f := range fs {
			warned = warned || f.Warning && strings.Contains(f.Text, "tmpfs")
		}
		if !warned || len(failed(fs)) != 0 {
			t.Errorf("Check of a store on tmpfs = %+v, want a warning about tmpfs and no failure", fs)
		}
	}
}

// check --broker connects as the gateway would, as another client: a
// refused password is a warning (run would keep trying), the right one
// passes.
func TestCheckBroker(t *testing.T) {
	b := testenv.MosquittoAuth(t, map[string]string{"gateway": "secret"}, "user gateway\ntopic readwrite fencegate/#")
	for _, tt := range []struct {
		password, want string
		warning        bool
	}{
		{"wrong", "not authorised", true},
		{"secret", "accepts the gateway's credentials", false},
	} {
		cfg := checkConfig(t, filepath.Join(t.TempDir(), "fence.db"))
		cfg.MQTT.Broker, cfg.MQTT.Username, cfg.MQTT.Password = b.URL, "gateway", tt.password
		var found bool
		for _, f := range service.Check(context.Background(), cfg, service.CheckOptions{Init: true, Broker: true}) {
			if f.Step != "broker" {
				continue
			}
			found = true
			if f.Warning != tt.warning || f.Err != nil || !strings.Contains(f.Text, tt.want) {
				t.Errorf("password %q: broker finding = %+v, want warning=%v with %q", tt.password, f, tt.warning, tt.want)
			}
		}
		if !found {
			t.Errorf("password %q: no broker finding", tt.password)
		}
	}
}
