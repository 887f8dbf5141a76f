package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/mqttsec"
	"github.com/fencegate/fencegate/tests/testenv"
)

// mqttBlock returns a configuration whose mqtt mapping is the given lines
// (from line 3 on), followed by the rest.
func mqttBlock(lines string) string {
	return "id: gw\nmqtt:\n" + lines + "store: fence.db\nboard: sim\n" + act
}

// TestParseSecurityErrors: mistakes in mqtt's TLS and password keys are
// errors at the line to edit, each saying what to do.
func TestParseSecurityErrors(t *testing.T) {
	testErrCases(t, []errCase{
		{"a password in the broker URL", mqttBlock("  broker: tcp://gw:hunter2@10.0.0.2:1883\n"),
			[]int{3}, []string{"mqtt.broker: remove the user name and password from the URL", "mqtt.username and mqtt.password_file"}},
		{"tls with a tcp URL", mqttBlock("  broker: tcp://broker.lan:1883\n  tls:\n    ca_file: ca.crt\n"),
			[]int{4}, []string{"mqtt.tls is set, but mqtt.broker tcp://broker.lan:1883 is not a TLS URL", "not be encrypted", "ssl://broker.lan:8883"}},
		{"tls with a ws URL", mqttBlock("  broker: ws://broker.lan:9001/mqtt\n  tls: {ca_file: ca.crt}\n"),
			[]int{4}, []string{"is not a TLS URL", "wss://broker.lan:9001/mqtt"}},
		{"certificate without key", mqttBlock("  broker: ssl://broker.lan:8883\n  tls:\n    cert_file: gw.crt\n"),
			[]int{5}, []string{"mqtt.tls.cert_file is set without mqtt.tls.key_file", "give both"}},
		{"key without certificate", mqttBlock("  broker: ssl://broker.lan:8883\n  tls:\n    ca_file: ca.crt\n    key_file: gw.key\n"),
			[]int{6}, []string{"mqtt.tls.key_file is set without mqtt.tls.cert_file"}},
		{"server name with a port", mqttBlock("  broker: ssl://10.0.0.2:8883\n  tls:\n    server_name: broker.lan:8883\n"),
			[]int{5}, []string{`mqtt.tls.server_name "broker.lan:8883"`, "without scheme or port"}},
		{"password inline and in a file", mqttBlock("  broker: tcp://127.0.0.1:1883\n  username: gw\n  password: x\n  password_file: pw\n"),
			[]int{6}, []string{"mqtt.password_file and mqtt.password are both set", "delete mqtt.password"}},
		{"password file without user name", mqttBlock("  broker: tcp://127.0.0.1:1883\n  password_file: pw\n"),
			[]int{4}, []string{"mqtt.password_file needs mqtt.username"}},
		{"misspelt tls key", mqttBlock("  broker: ssl://broker.lan:8883\n  tls:\n    ca-file: ca.crt\n"),
			[]int{5}, []string{`unknown key "ca-file" in tls in mqtt: did you mean "ca_file"?`}},
		{"tls is a single value", mqttBlock("  broker: ssl://broker.lan:8883\n  tls: true\n"),
			[]int{4}, []string{`tls in mqtt must be a mapping`, "ca_file"}},
	})
	// A broker URL that is no URL says so without repeating the URL, which
	// may hold a password.
	_, err := Parse([]byte(mqttBlock("  broker: \"tcp://gw:hunter2@[::1\"\n")))
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("Parse of a broken URL with a password = %v, want an error at line 3 without the password", err)
	}
}

// TestParseSecurityValid: the TLS URLs, with and without mqtt.tls.
func TestParseSecurityValid(t *testing.T) {
	for _, m := range []string{
		"  broker: ssl://broker.lan:8883\n",
		"  broker: mqtts://broker.lan:8883\n  tls: {ca_file: ca.crt, server_name: broker.lan}\n",
		"  broker: tls://10.0.0.2:8883\n  tls: {ca_file: ca.crt, cert_file: gw.crt, key_file: gw.key, server_name: \"::1\"}\n",
		"  broker: wss://broker.lan/mqtt\n  tls: {}\n",
		"  broker: tcp://127.0.0.1:1883\n  username: gw\n  password_file: pw\n",
	} {
		if _, err := Parse([]byte(mqttBlock(m))); err != nil {
			t.Errorf("Parse(%q) = %v, want no error", m, err)
		}
	}
}

// writeConfig writes text as dir/gateway.yaml and returns its path.
func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadSecurity: Load reads the TLS files and the password file,
// relative to the configuration's directory, and a file it cannot use is
// an error at its key's line that names the path.
func TestLoadSecurity(t *testing.T) {
	certs := testenv.MakeCerts(t)
	dir := t.TempDir()
	for _, f := range []string{certs.CA, certs.Client, certs.ClientKey} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "mqtt.password"), []byte("s3cret-pw\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	t.Setenv(mqttsec.EnvPassword, "from-the-env")
	good := mqttBlock("  broker: ssl://127.0.0.1:8883\n  username: gw\n  password_file: mqtt.password\n" +
		"  tls:\n    ca_file: ca.crt\n    cert_file: client.crt\n    key_file: client.key\n")
	c, err := Load(writeConfig(t, dir, good))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	sec, err := c.MQTT.Security()
	if err != nil {
		t.Fatal(err)
	}
	if sec.Password != "s3cret-pw" || sec.Settings.PasswordFrom != "mqtt.password_file "+filepath.Join(dir, "mqtt.password") {
		t.Errorf("password %q from %q, want the file's (not the environment's)", sec.Password, sec.Settings.PasswordFrom)
	}
	if sec.TLS == nil || sec.TLS.RootCAs == nil || len(sec.TLS.Certificates) != 1 || sec.TLS.InsecureSkipVerify ||
		sec.Settings.TLS.CAFile != filepath.Join(dir, "ca.crt") {
		t.Errorf("Security = %+v, want the CA and client certificate read from %s", sec, dir)
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("Warnings = %q, want none", w)
	}

	// Each missing or unusable file: an error at its line.
	bad := strings.NewReplacer("ca_file: ca.crt", "ca_file: nope.crt", "key_file: client.key", "key_file: ca.crt").Replace(good)
	_, err = Load(writeConfig(t, dir, bad))
	want := []string{"line 7: mqtt.tls.ca_file " + filepath.Join(dir, "nope.crt") + ": no such file",
		"line 9: mqtt.tls.key_file " + filepath.Join(dir, "ca.crt") + ": holds no PEM private key"}
	if err == nil || strings.Count(err.Error(), "\n") != 1 || !strings.Contains(err.Error(), want[0]) || !strings.Contains(err.Error(), want[1]) {
		t.Errorf("Load with a missing CA and a wrong key = %v, want two errors: %q", err, want)
	}
	_, err = Load(writeConfig(t, dir, strings.Replace(good, "password_file: mqtt.password", "password_file: /nonexistent/pw", 1)))
	if err == nil || !strings.Contains(err.Error(), "line 5: mqtt.password_file /nonexistent/pw: no such file") {
		t.Errorf("Load with a missing password file = %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(writeConfig(t, dir, strings.Replace(good, "password_file: mqtt.password", "password_file: empty", 1)))
	if err == nil || !strings.Contains(err.Error(), "line 5: mqtt.password_file "+filepath.Join(dir, "empty")+": is empty") {
		t.Errorf("Load with an empty password file = %v", err)
	}

	// The environment's password serves when the configuration names none.
	c, err = Load(writeConfig(t, dir, mqttBlock("  broker: tcp://127.0.0.1:1883\n  username: gw\n")))
	if err != nil {
		t.Fatal(err)
	}
	if sec, _ := c.MQTT.Security(); sec.Password != "from-the-env" || sec.Settings.PasswordFrom != "$FENCEGATE_MQTT_PASSWORD" || sec.TLS != nil {
		t.Errorf("Security = %q from %q (TLS %v), want the environment's password, no TLS", sec.Password, sec.Settings.PasswordFrom, sec.TLS)
	}
	// A TLS URL without mqtt.tls: TLS with the system's CAs.
	c, err = Load(writeConfig(t, dir, mqttBlock("  broker: mqtts://broker.lan:8883\n")))
	if err != nil {
		t.Fatal(err)
	}
	if sec, _ := c.MQTT.Security(); sec.TLS == nil || sec.TLS.RootCAs != nil || sec.TLS.InsecureSkipVerify || sec.Password != "" {
		t.Errorf("Security of mqtts:// without mqtt.tls = %+v, want TLS with the system's CAs and no password", sec)
	}
	// Parse reads no files: Security says so instead of connecting without them.
	p, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.MQTT.Security(); err == nil {
		t.Error("Security of a parsed configuration that names files = nil error, want one")
	}
}

// TestSecurityWarnings: an inline password, a password file every user
// may read, and a password sent unencrypted to another machine are
// warnings, at their lines; none of them shows the password.
func TestSecurityWarnings(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret-pw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pw, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		mqtt string
		want []string
	}{
		{"  broker: tcp://127.0.0.1:1883\n  username: gw\n  password: s3cret-pw\n",
			[]string{"line 5: mqtt.password holds the broker password in the configuration file itself: move it to a file of its own named by mqtt.password_file"}},
		{"  broker: tcp://127.0.0.1:1883\n  username: gw\n  password_file: pw\n",
			[]string{"line 5: mqtt.password_file " + pw + " can be read by every user of this machine (mode 0644)"}},
		{"  broker: tcp://10.0.0.2:1883\n  username: gw\n  password: s3cret-pw\n",
			[]string{"line 5: mqtt.password holds", "line 3: the broker password goes over the network unencrypted (mqtt.broker tcp://10.0.0.2:1883)"}},
		{"  broker: ssl://10.0.0.2:8883\n  username: gw\n", []string{"line 4: mqtt.username is set but no password is given"}},
	} {
		c, err := Load(writeConfig(t, dir, mqttBlock(tt.mqtt)))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(c.Warnings(), "\n")
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q: Warnings = %q, want %q", tt.mqtt, got, w)
			}
		}
		if strings.Count(got, "\n")+1 != len(tt.want) || strings.Contains(got, "s3cret") {
			t.Errorf("%q: Warnings = %q, want %d, without the password", tt.mqtt, got, len(tt.want))
		}
	}
}
