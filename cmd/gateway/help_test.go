package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHelpNeverActs: every command's -h, -help and
// --help print its usage on stdout and exit 0 without doing anything: no
// store created, no simulator started, no gateway run, wherever the flag
// stands. Test-only flags are not listed.
func TestHelpNeverActs(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "tcp://127.0.0.1:1", "127.0.0.1:0")
	store := filepath.Join(dir, "fence.db")
	simDir := filepath.Join(dir, "sim")
	// A valid wifi.txt: gateway wifi without -h would write wpa.conf.
	if err := os.WriteFile(filepath.Join(dir, "wifi.txt"), []byte("country: DE\nssid: a\nopen: yes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	commands := [][]string{
		{"run", "--config", cfg, "--init"},
		{"init", "--config", cfg},
		{"check", "--config", cfg, "--init"},
		{"inspect", "--store", store},
		{"send", "--gateway", "gw", "--actuator", "pump", "--token", "5", "on"},
		{"sim", "--dir", simDir, "--http", "127.0.0.1:0", "--mqtt", "127.0.0.1:0"},
		{"sim", "scenario", "paused-controller", "--sim", "http://127.0.0.1:1"},
		{"keygen", "--out", filepath.Join(dir, "ctl")},
		{"wifi", "--from", filepath.Join(dir, "wifi.txt"), "--out", filepath.Join(dir, "wpa.conf")},
		{"bridge", "--config", cfg, "--topology"},
		{"acl", "--config", cfg},
		{"bench", "--profile", "single", "--store-dir", filepath.Join(dir, "bench")},
		{"version"},
	}
	for _, args := range commands {
		for _, h := range []string{"-h", "-help", "--help"} {
			for _, at := range []int{1, len(args)} { // right after the command, and last
				if args[0] == "sim" && len(args) > 1 && args[1] == "scenario" && at == 1 {
					at = 2
				}
				argv := append(append(append([]string{}, args[:at]...), h), args[at:]...)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				cmd := exec.CommandContext(ctx, binary, argv...)
				var stdout, stderr strings.Builder
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				timedOut := ctx.Err() != nil
				cancel()
				if timedOut {
					t.Fatalf("gateway %s did not return within 10s: it is doing something\n%s%s", strings.Join(argv, " "), stdout.String(), stderr.String())
				}
				var ee *exec.ExitError
				if errors.As(err, &ee) || err != nil {
					t.Errorf("gateway %s: %v, want exit 0\n%s", strings.Join(argv, " "), err, stderr.String())
				}
				if !strings.Contains(stdout.String(), "Usage:") {
					t.Errorf("gateway %s: stdout lacks the usage:\n%s", strings.Join(argv, " "), stdout.String())
				}
				for _, hidden := range []string{"sim-crash-file", "announce"} {
					if strings.Contains(stdout.String()+stderr.String(), hidden) {
						t.Errorf("gateway %s lists the test-only flag --%s", strings.Join(argv, " "), hidden)
					}
				}
				for _, p := range []string{store, simDir, filepath.Join(dir, "ctl.key"), filepath.Join(dir, "ctl.pub"), filepath.Join(dir, "bench"), filepath.Join(dir, "wpa.conf")} {
					if _, err := os.Stat(p); err == nil {
						t.Fatalf("gateway %s created %s", strings.Join(argv, " "), p)
					}
				}
			}
		}
	}
	// "gateway help CMD" is CMD -h.
	out, code := runCLI(t, "help", "run")
	if code != 0 || !strings.Contains(out, "gateway run --config FILE") {
		t.Errorf("gateway help run: exit %d\n%s", code, out)
	}
}

// TestTopLevelUsageListsSendStates: the top-level usage names every state
// gateway send takes, as its own usage does.
func TestTopLevelUsageListsSendStates(t *testing.T) {
	out, code := runCLI(t, "help")
	if code != 0 || !strings.Contains(out, "gateway send [flags] on|off|fence|pulse|duty|reset") {
		t.Errorf("gateway help: exit %d, want the send line with on|off|fence|pulse|duty|reset:\n%s", code, out)
	}
	send, _ := runCLI(t, "send", "-h")
	if !strings.Contains(send, "on|off|fence|pulse|duty|reset") {
		t.Errorf("gateway send -h lacks on|off|fence|pulse|duty|reset:\n%s", send)
	}
	// The number flags name what they take (a flag.Value of its own says
	// "value" unless its usage names it).
	for _, f := range []string{"-token N\n", "-seq N\n"} {
		if !strings.Contains(send, f) {
			t.Errorf("gateway send -h lacks %q:\n%s", f, send)
		}
	}
}
