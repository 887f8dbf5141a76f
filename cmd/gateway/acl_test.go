package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestACL: gateway acl prints the ACL that docs/raspberry-pi-os.md shows for
// one gateway and one controller (which TestSingleGatewayACL runs against
// a real Mosquitto), adds what inputs and Home Assistant need, and refuses
// names that would break it.
func TestACL(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.yaml")
	base := "id: greenhouse-1\nmqtt:\n  broker: tcp://127.0.0.1:1883\n  username: gateway\nstore: fence.db\nboard: sim\nactuators:\n  - {name: pump, pin: GPIO17}\n"
	if err := os.WriteFile(cfg, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, "acl", "--config", cfg, "--controller", "controller")
	if code != 0 {
		t.Fatalf("gateway acl: exit %d\n%s", code, out)
	}
	doc, err := os.ReadFile("../../docs/raspberry-pi-os.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(doc), "sudo tee /etc/mosquitto/acl <<'EOF'\n")
	want, _, ok := strings.Cut(rest, "\nEOF\n")
	if !ok {
		t.Fatal("docs/raspberry-pi-os.md: no ACL")
	}
	_, got, _ := strings.Cut(out, "\n") // the comment line
	if strings.TrimSpace(got) != strings.TrimSpace(want) {
		t.Errorf("gateway acl differs from docs/raspberry-pi-os.md's ACL:\n%s\n--- docs ---\n%s", got, want)
	}

	more := strings.Replace(base, "board: sim\n", "board: sim\nhome_assistant: {}\ninputs:\n  - {name: door, pin: GPIO5}\n", 1)
	if err := os.WriteFile(cfg, []byte(more), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = runCLI(t, "acl", "--config", cfg, "--controller", "a,b")
	for _, want := range []string{"topic write fencegate/greenhouse-1/+/input\n", "topic write homeassistant/device/fencegate_greenhouse-1/config\n",
		"topic read homeassistant/status\n", "user a\n", "user b\n", "topic read fencegate/greenhouse-1/reply/b/#\n"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("gateway acl with inputs and Home Assistant: exit %d, want %q:\n%s", code, want, out)
		}
	}

	for _, tt := range []struct{ ctl, want string }{
		{"gateway", `controller "gateway" is the gateway's own user`},
		{"a/b", `controller "a/b": a broker user name for an ACL has no`},
		{"a,a", `controller "a" is named twice`},
	} {
		if out, code := runCLI(t, "acl", "--config", cfg, "--controller", tt.ctl); code != exitConfig || !strings.Contains(out, tt.want) {
			t.Errorf("--controller %s: exit %d, want %d with %q:\n%s", tt.ctl, code, exitConfig, tt.want, out)
		}
	}
	if err := os.WriteFile(cfg, []byte(strings.Replace(base, "  username: gateway\n", "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := runCLI(t, "acl", "--config", cfg); code != exitConfig || !strings.Contains(out, "mqtt.username is empty") {
		t.Errorf("no mqtt.username: exit %d, want %d:\n%s", code, exitConfig, out)
	}
}
