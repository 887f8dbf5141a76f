package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/httpapi"
	"github.com/fencegate/fencegate/tests/testenv"
)

// securedConfig writes dir/gateway.yaml for gateway id on the sim board,
// with the given lines in its mqtt mapping (after the broker), and returns
// its path.
func securedConfig(t *testing.T, dir, id, broker, httpAddr, mqtt string) string {
	t.Helper()
	path := filepath.Join(dir, "gateway.yaml")
	text := fmt.Sprintf("id: %s\nmqtt:\n  broker: %s\n%sstore: fence.db\nboard: sim\nhttp: %q\nactuators:\n  - {name: pump, pin: GPIO17}\n",
		id, broker, mqtt, httpAddr)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeSecret(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// statusBody returns GET /api/status as it comes, and decoded.
func statusBody(t *testing.T, addr string) (string, httpapi.Status) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var st httpapi.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("status %s: %v", b, err)
	}
	return string(b), st
}

// waitStatus polls the gateway p's status until ok holds, and returns its
// body.
func waitStatus(t *testing.T, p *proc, addr, what string, ok func(httpapi.Status) bool) string {
	t.Helper()
	waitAPI(t, addr, p)
	deadline := time.Now().Add(20 * time.Second)
	for {
		body, st := statusBody(t, addr)
		if ok(st) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("status not %s within 20s: %s\n%s", what, body, p.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSecretsNeverShown: passwords, right and wrong, from
// a password file, the environment or (deprecated) inline, never appear in
// a gateway's log (at debug level), in /api/status, in gateway check's
// output or in gateway send's, on the paths that work and on those that
// fail (a refused password, a configuration error).
func TestSecretsNeverShown(t *testing.T) {
	certs := testenv.MakeCerts(t)
	const (
		secret = "Pw-7f3a9c-gateway"    // the gateway's password
		wrong  = "Pw-0b1d2e-one-off"    // a wrong one
		ctlPW  = "Pw-5e6f70-controller" // the controller's
	)
	b := testenv.MosquittoTLS(t, testenv.TLSBrokerOptions{Certs: certs, Users: map[string]string{"gateway": secret, "ctl": ctlPW}})
	ca := fmt.Sprintf("  tls:\n    ca_file: %s\n", certs.CA)

	type shown struct{ what, text string }
	var all []shown
	show := func(what, text, want string) {
		t.Helper()
		all = append(all, shown{what, text})
		if !strings.Contains(text, want) {
			t.Errorf("%s: want %q in:\n%s", what, want, text)
		}
	}
	// gateway runs a gateway with the mqtt lines (DIR: its directory), a
	// password file DIR/mqtt.password holding password (if not empty) and
	// env, and returns it, its API address and its configuration file.
	gateway := func(name, mqtt, password string, env ...string) (*proc, string, string) {
		dir := t.TempDir()
		if password != "" {
			writeSecret(t, filepath.Join(dir, "mqtt.password"), password+"\n")
		}
		addr := fmt.Sprintf("127.0.0.1:%d", testenv.Port(t))
		cfg := securedConfig(t, dir, testenv.ID(t, name), b.URL, addr, strings.ReplaceAll(mqtt, "DIR", dir))
		return startProc(t, env, "run", "--config", cfg, "--init", "--log-level", "debug"), addr, cfg
	}
	refused := func(st httpapi.Status) bool { return st.Broker.Failures >= 2 }

	// The right password, from a file: it connects, takes a command sent
	// with gateway send (its password from a file too), and check --broker
	// gets in as well.
	withFile := "  username: gateway\n  password_file: DIR/mqtt.password\n" + ca
	p, addr, cfg := gateway("right", withFile, secret)
	body := waitStatus(t, p, addr, "taking commands", func(st httpapi.Status) bool { return st.Broker.Subscribed })
	show("status, right password", body, `"subscribed": true`)
	ctlPass := writeSecret(t, filepath.Join(t.TempDir(), "ctl.password"), ctlPW+"\n")
	out, code := runCLI(t, "send", "--broker", b.URL, "--tls-ca", certs.CA, "--username", "ctl", "--password-file", ctlPass,
		"--gateway", gatewayIDOf(t, cfg), "--actuator", "pump", "--token", "1", "on")
	show("gateway send", out, `"outcome":"applied"`)
	if code != 0 {
		t.Errorf("gateway send exit %d, want 0:\n%s", code, out)
	}
	out, _ = runCLI(t, "check", "--broker", "--config", cfg)
	show("check --broker, right password (store in use)", out, "accepts the gateway's credentials")
	p.kill()
	show("log, right password", p.output(), "taking commands")

	// A wrong password, from a file.
	p, addr, cfg = gateway("file", withFile, wrong)
	show("status, wrong password in a file", waitStatus(t, p, addr, "refused twice", refused), "not authorised")
	out, _ = runCLI(t, "check", "--broker", "--config", cfg)
	show("check --broker, wrong password in a file", out, "not authorised")
	p.kill()
	show("log, wrong password in a file", p.output(), "not authorised")

	// A wrong password from the environment.
	p, addr, cfg = gateway("env", "  username: gateway\n"+ca, "", "FENCEGATE_MQTT_PASSWORD="+wrong)
	show("status, wrong password in the environment", waitStatus(t, p, addr, "refused twice", refused), "$FENCEGATE_MQTT_PASSWORD")
	cmd := exec.Command(binary, "check", "--broker", "--config", cfg)
	cmd.Env = append(os.Environ(), "FENCEGATE_MQTT_PASSWORD="+wrong)
	outb, _ := cmd.CombinedOutput()
	show("check --broker, wrong password in the environment", string(outb), "not authorised")
	p.kill()
	show("log, wrong password in the environment", p.output(), "not authorised")

	// A wrong password inline (still read; a warning says to move it).
	p, addr, cfg = gateway("inline", fmt.Sprintf("  username: gateway\n  password: %s\n%s", wrong, ca), "")
	show("status, wrong password inline", waitStatus(t, p, addr, "refused twice", refused), "not authorised")
	out, _ = runCLI(t, "check", "--broker", "--config", cfg)
	show("check --broker, wrong password inline", out, "config: warning: line 5: mqtt.password holds the broker password")
	p.kill()
	show("log, wrong password inline", p.output(), "mqtt.password holds the broker password")

	// Configuration errors that involve a password.
	dir := t.TempDir()
	cfg = securedConfig(t, dir, "x", strings.Replace(b.URL, "ssl://", "ssl://gateway:"+secret+"@", 1), "", "")
	out, code = runCLI(t, "check", "--config", cfg)
	show("check, password in the URL", out, "remove the user name and password from the URL")
	if code != exitConfig {
		t.Errorf("check with a password in the URL: exit %d, want %d", code, exitConfig)
	}
	writeSecret(t, filepath.Join(dir, "two-lines"), "gateway:"+secret+"\n"+wrong+"\n")
	cfg = securedConfig(t, dir, "x", b.URL, "", "  username: gateway\n  password_file: two-lines\n"+ca)
	out, code = runCLI(t, "check", "--config", cfg)
	show("check, password file of two lines", out, "has 2 lines")
	if code != exitConfig {
		t.Errorf("check with a password file of two lines: exit %d, want %d", code, exitConfig)
	}
	out, _ = runCLI(t, "send", "--broker", strings.Replace(b.URL, "ssl://", "ssl://ctl:"+ctlPW+"@", 1), "--gateway", "x", "--actuator", "pump", "--token", "1", "on")
	show("gateway send, password in the URL", out, "remove the user name and password from the URL")
	wrongCtl := writeSecret(t, filepath.Join(dir, "ctl.password"), wrong+"\n")
	out, _ = runCLI(t, "send", "--broker", b.URL, "--tls-ca", certs.CA, "--username", "ctl", "--password-file", wrongCtl,
		"--gateway", "x", "--actuator", "pump", "--token", "1", "on")
	show("gateway send, wrong password", out, `not authorised: the broker refused user "ctl" with the password from --password-file `+wrongCtl)

	for _, s := range all {
		for _, pw := range []string{secret, wrong, ctlPW} {
			if strings.Contains(s.text, pw) {
				t.Errorf("%s shows a password (%q):\n%s", s.what, pw, s.text)
			}
		}
	}
}

// gatewayIDOf returns the id in the configuration file cfg.
func gatewayIDOf(t *testing.T, cfg string) string {
	t.Helper()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	id, _, _ := strings.Cut(strings.TrimPrefix(string(b), "id: "), "\n")
	return id
}

// TestSendTLS: gateway send's TLS and password flags, and what it says
// and how it exits when they are wrong.
func TestSendTLS(t *testing.T) {
	certs := testenv.MakeCerts(t)
	b := testenv.MosquittoTLS(t, testenv.TLSBrokerOptions{Certs: certs, RequireCertificate: true, Users: map[string]string{"ctl": "ctl-pw"}})
	dir := t.TempDir()
	pw := writeSecret(t, filepath.Join(dir, "pw"), "ctl-pw\n")
	id := testenv.ID(t, "absent")
	common := []string{"--gateway", id, "--actuator", "pump", "--token", "1", "--timeout", "300ms", "--username", "ctl", "--password-file", pw}
	good := []string{"--broker", b.URL, "--tls-ca", certs.CA, "--tls-cert", certs.Client, "--tls-key", certs.ClientKey}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		// No gateway answers, but the broker took the connection: a timeout.
		{"good", good, exitTimeout, "no answer"},
		{"wrong CA", []string{"--broker", b.URL, "--tls-ca", certs.OtherCA, "--tls-cert", certs.Client, "--tls-key", certs.ClientKey},
			exitFailure, "the broker's certificate is not signed by a CA in --tls-ca " + certs.OtherCA},
		{"wrong server name", append(append([]string{}, good...), "--tls-server-name", "broker.example"),
			exitFailure, `not for "broker.example" (--tls-server-name): set --tls-server-name to a name it is for`},
		{"no client certificate", []string{"--broker", b.URL, "--tls-ca", certs.CA},
			exitFailure, "the broker requires a client certificate (it said \"certificate required\"): set --tls-cert and --tls-key"},
		{"TLS flags with a tcp URL", []string{"--broker", strings.Replace(b.URL, "ssl://", "tcp://", 1), "--tls-ca", certs.CA},
			exitUsage, "is not a TLS URL, so the connection would not be encrypted"},
		{"certificate without key", []string{"--broker", b.URL, "--tls-cert", certs.Client}, exitUsage, "--tls-cert is set without --tls-key"},
		{"missing CA file", []string{"--broker", b.URL, "--tls-ca", filepath.Join(dir, "nope.crt")},
			exitConfig, "--tls-ca " + filepath.Join(dir, "nope.crt") + ": no such file"},
	}
	for _, tt := range tests {
		out, code := runCLI(t, append(append([]string{"send"}, common...), append(tt.args, "on")...)...)
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("%s: gateway send exit %d, want %d with %q:\n%s", tt.name, code, tt.code, tt.want, out)
		}
	}
	// The password from the environment, and a wrong one.
	for _, tt := range []struct {
		env, want string
		code      int
	}{
		{"ctl-pw", "no answer", exitTimeout},
		{"wrong-pw", `not authorised: the broker refused user "ctl" with the password from $FENCEGATE_MQTT_PASSWORD`, exitFailure},
	} {
		cmd := exec.Command(binary, append([]string{"send", "--gateway", id, "--actuator", "pump", "--token", "1", "--timeout", "300ms", "--username", "ctl"},
			append(good, "on")...)...)
		cmd.Env = append(os.Environ(), "FENCEGATE_MQTT_PASSWORD="+tt.env)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != tt.code || !strings.Contains(string(out), tt.want) {
			t.Errorf("$FENCEGATE_MQTT_PASSWORD=%s: gateway send exit %d, want %d with %q:\n%s", tt.env, code, tt.code, tt.want, out)
		}
	}
}

// TestUnreadableSecret: a password file the gateway's user cannot read is
// a configuration error (78) that names the file and the user, and says
// how to fix it. As root, the gateway runs as nobody.
func TestUnreadableSecret(t *testing.T) {
	dir, err := os.MkdirTemp("", "fencegate-secret-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "gateway")
	exe, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	pw := writeSecret(t, filepath.Join(dir, "mqtt.password"), "Pw-unreadable\n")
	cfg := securedConfig(t, dir, "x", "tcp://127.0.0.1:1", "", "  username: gateway\n  password_file: mqtt.password\n")
	os.Chmod(cfg, 0o644)
	cmd := exec.Command(bin, "run", "--config", cfg)
	if !testenv.AsNobody(cmd) {
		if err := os.Chmod(pw, 0); err != nil {
			t.Fatal(err)
		}
	}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	want := "line 5: mqtt.password_file " + pw + ": permission denied: "
	if code != exitConfig || !strings.Contains(string(out), want) || !strings.Contains(string(out), "chown root:fencegate "+pw) ||
		strings.Contains(string(out), "Pw-unreadable") {
		t.Errorf("run with an unreadable password file: exit %d, want %d with %q and how to fix it:\n%s", code, exitConfig, want, out)
	}
}

// TestCheckConfigOnlyReadsNoFiles: check --config-only, on another machine
// than the gateway's, reads neither the password file nor the TLS files,
// and says so; without it, a missing file is a configuration error.
func TestCheckConfigOnlyReadsNoFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := securedConfig(t, dir, "x", "ssl://broker.lan:8883", "",
		"  username: gateway\n  password_file: mqtt.password\n  tls:\n    ca_file: /etc/fencegate/nope.crt\n")
	out, code := runCLI(t, "check", "--config-only", "--config", cfg)
	for _, w := range []string{"not read (--config-only): mqtt.password_file " + filepath.Join(dir, "mqtt.password"),
		"not read (--config-only): mqtt.tls.ca_file /etc/fencegate/nope.crt"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("check --config-only: exit %d, want 0 with %q:\n%s", code, w, out)
		}
	}
	out, code = runCLI(t, "check", "--config", cfg)
	if code != exitConfig || !strings.Contains(out, "line 5: mqtt.password_file "+filepath.Join(dir, "mqtt.password")+": no such file") ||
		!strings.Contains(out, "line 7: mqtt.tls.ca_file /etc/fencegate/nope.crt: no such file") {
		t.Errorf("check: exit %d, want %d with both missing files at their lines:\n%s", code, exitConfig, out)
	}
	if out, code = runCLI(t, "run", "--init", "--config", cfg); code != exitConfig || !strings.Contains(out, "mqtt.tls.ca_file /etc/fencegate/nope.crt: no such file") {
		t.Errorf("run: exit %d, want %d with the missing CA file:\n%s", code, exitConfig, out)
	}
}
