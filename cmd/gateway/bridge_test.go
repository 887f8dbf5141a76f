package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBridgeCarriesWhatTheACLGrants: the bridge carries every topic the
// gateway's ACL grants it (with inputs and Home Assistant), each the way
// the gateway uses it: what it only writes goes out, what it only reads
// comes in, its claims both ways; its own probe on the command filter is
// kept in (a command filter carried out would send it to the site). The
// site's ACL for the bridge's user grants the same. One list, two
// renderings: they cannot drift.
func TestBridgeCarriesWhatTheACLGrants(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.yaml")
	text := "id: greenhouse-1\nmqtt:\n  broker: tcp://127.0.0.1:1883\n  username: gateway\nstore: fence.db\nboard: sim\nhome_assistant: {}\n" +
		"inputs:\n  - {name: door, pin: GPIO5}\nactuators:\n  - {name: pump, pin: GPIO17}\n"
	site := filepath.Join(dir, "bridge.txt")
	for name, s := range map[string]string{cfg: text, site: "broker: tcp://site.lan:1883\nusername: gh-1\n"} {
		if err := os.WriteFile(name, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	acl, code := runCLI(t, "acl", "--config", cfg)
	if code != 0 {
		t.Fatalf("gateway acl: exit %d\n%s", code, acl)
	}
	conf, code := runCLI(t, "bridge", "--config", cfg, "--site", site, "--credentials", dir)
	if code != 0 {
		t.Fatalf("gateway bridge: exit %d\n%s", code, conf)
	}
	siteACL, code := runCLI(t, "bridge", "--config", cfg, "--site-acl", "gh-1")
	if code != 0 {
		t.Fatalf("gateway bridge --site-acl: exit %d\n%s", code, siteACL)
	}
	routes := map[string]string{}
	for _, l := range strings.Split(conf, "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] == "topic" {
			routes[f[1]] = f[2]
		}
	}
	granted := 0
	for _, l := range strings.Split(acl, "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "topic" {
			continue
		}
		granted++
		want := map[string]string{"write": "out", "read": "in", "readwrite": "both"}[f[1]]
		if strings.HasSuffix(f[2], "/+/set") {
			want = "in"
		}
		if got := routes[f[2]]; got != want {
			t.Errorf("the ACL grants %s %s; the bridge carries it %q, want %q:\n%s", f[1], f[2], got, want, conf)
		}
		access := map[string]string{"out": "write", "in": "read", "both": "readwrite"}[want]
		if !strings.Contains(siteACL, "topic "+access+" "+f[2]+"\n") {
			t.Errorf("the site's ACL for the bridge does not grant %s %s:\n%s", access, f[2], siteACL)
		}
	}
	if granted < 8 || len(routes) != granted {
		t.Errorf("the ACL grants %d topics, the bridge carries %d:\n%s\n%s", granted, len(routes), acl, conf)
	}
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	return h
}

// TestBridgeCommand: where the broker is (this machine by its own name
// too), and what gateway bridge refuses.
func TestBridgeCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := func(broker string) string {
		return write(strings.NewReplacer(":", "_", "/", "_", "[", "_", "]", "_").Replace(broker)+".yaml", "id: gh-1\nmqtt:\n  broker: "+broker+"\n  username: gateway\nstore: fence.db\nboard: sim\nactuators:\n  - {name: pump, pin: GPIO17}\n")
	}
	for broker, want := range map[string]string{
		"tcp://127.0.0.1:1883": "local\n", "tcp://localhost": "local\n", "tcp://[::1]:1883": "local\n", "tcp://LocalHost.:1883": "local\n",
		"tcp://" + hostname(t) + ":1883": "local\n", "tcp://" + hostname(t) + ".local:1883": "local\n",
		"tls://broker.site.lan:8883": "direct tls://broker.site.lan:8883\n", "tcp://10.0.0.5:1883": "direct tcp://10.0.0.5:1883\n",
	} {
		if out, code := runCLI(t, "bridge", "--config", cfg(broker), "--topology"); code != 0 || out != want {
			t.Errorf("broker %s: --topology printed %q (exit %d), want %q", broker, out, code, want)
		}
	}
	site := write("bridge.txt", "broker: tcp://site.lan:1883\nusername: gh-1\n")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--config", cfg("tls://site.lan:8883"), "--site", site}, exitConfig, "not this machine's Mosquitto: a bridge carries"},
		{[]string{"--config", cfg("tcp://127.0.0.1:1883"), "--site", write("bad.txt", "broker: tcp://b\npassword: x\n")}, exitConfig, "bad.txt line 2: the password does not go in bridge.txt"},
		{[]string{"--config", cfg("tcp://127.0.0.1:1883"), "--site", write("off.txt", "off\n")}, 0, "# bridge: off\n"},
		{[]string{"--config", cfg("tcp://127.0.0.1:1883"), "--site", filepath.Join(dir, "none.txt")}, exitConfig, "no such file"},
		{[]string{"--config", cfg("tcp://127.0.0.1:1883")}, exitUsage, "give one of --topology"},
		{[]string{"--config", cfg("tcp://127.0.0.1:1883"), "--topology", "--site", site}, exitUsage, "give one of"},
		{[]string{"--config", cfg("tcp://127.0.0.1:1883"), "--site-acl", "a b"}, exitUsage, "a broker user name"},
	} {
		if out, code := runCLI(t, append([]string{"bridge"}, c.args...)...); code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("gateway bridge %v: exit %d, want %d with %q:\n%s", c.args, code, c.code, c.want, out)
		}
	}
}
