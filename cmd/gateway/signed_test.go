package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/boards"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sign"
	"github.com/fencegate/fencegate/tests/testctl"
	"github.com/fencegate/fencegate/tests/testenv"
	"github.com/fencegate/fencegate/wire"
)

// keygen runs gateway keygen --out dir/name and returns the path of the
// private key and the public key line.
func keygen(t *testing.T, dir, name string) (keyPath, pub string) {
	t.Helper()
	out, code := runCLI(t, "keygen", "--out", filepath.Join(dir, name))
	if code != 0 {
		t.Fatalf("gateway keygen: exit %d\n%s", code, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, name+".pub"))
	if err != nil {
		t.Fatal(err)
	}
	pub = strings.TrimSpace(string(b))
	if !strings.Contains(out, `public_key: "`+pub+`"`) {
		t.Errorf("gateway keygen does not print the YAML to paste:\n%s", out)
	}
	return filepath.Join(dir, name+".key"), pub
}

// secrets returns the lines of a PEM private key file that carry the key.
func secrets(t *testing.T, keyPath string) []string {
	t.Helper()
	b, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "-----") {
			out = append(out, l, l[len(l)/2:]) // the line, and a part of it
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no key lines", keyPath)
	}
	return out
}

// TestSignedCommandsEndToEnd: keys made by gateway keygen, a gateway
// process that requires signed commands, commands sent by gateway send
// --key through a real broker. Signed by a configured controller for its
// scope: applied. Unsigned, signed with another key, by an unknown key,
// out of scope, or a signed payload replayed onto another actuator:
// rejected with the reason, nothing driven. The private keys appear
// nowhere in the gateway's log, /api/status or gateway check's output.
func TestSignedCommandsEndToEnd(t *testing.T) {
	broker := testenv.EmbeddedBroker(t)
	dir := t.TempDir()
	keyA, pubA := keygen(t, dir, "ctl-a")
	keyB, pubB := keygen(t, dir, "ctl-b")
	keyX, _ := keygen(t, dir, "ctl-x") // not configured
	if fi, err := os.Stat(keyA); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, mode %v, want 0600", keyA, err, fi.Mode().Perm())
	}
	if out, code := runCLI(t, "keygen", "--out", filepath.Join(dir, "ctl-a")); code == 0 || !strings.Contains(out, "exists") {
		t.Errorf("gateway keygen over an existing key: exit %d, want a refusal\n%s", code, out)
	}

	httpAddr := fmt.Sprintf("127.0.0.1:%d", testenv.Port(t))
	gw := gatewayID(t)
	cfg := writeConfigWith(t, dir, gw, broker, httpAddr, fmt.Sprintf(`require_signature: true
controllers:
  - name: ctl-a
    public_key: %q
    scopes: [pump]
  - name: ctl-b
    public_key: %q
    scopes: [climate]
actuators:
  - {name: pump, pin: GPIO17}
  - {name: fan, pin: GPIO22, scope: climate}
  - {name: heater, pin: GPIO23, scope: climate}
`, pubA, pubB))
	out, code := runCLI(t, "check", "--config-only", "--config", cfg)
	if code != 0 || !strings.Contains(out, "signed commands: 2 controllers: ctl-a (scopes pump); ctl-b (scopes climate); every actuator requires signed commands") {
		t.Errorf("gateway check --config-only: exit %d\n%s", code, out)
	}
	checkOut := out
	ctl := testctl.Connect(t, broker, wire.Topics{GatewayID: gw})
	p := startProc(t, nil, "run", "--config", cfg, "--init", "--log-level", "debug")
	ctl.WaitStatus(t, "online")
	waitAPI(t, httpAddr, p)
	latch := filepath.Join(dir, "fence.db.pins")

	send := func(args ...string) (string, int) {
		return runCLI(t, append([]string{"send", "--broker", broker, "--gateway", gw, "--timeout", "10s"}, args...)...)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"signed by ctl-a for the pump", []string{"--actuator", "pump", "--token", "42", "--key", keyA, "--signer", "ctl-a", "on"}, 0, `"outcome":"applied"`},
		{"unsigned", []string{"--actuator", "pump", "--token", "43", "off"}, exitRejected, `"reason":"unsigned"`},
		{"unsigned fence-only to the end of the range", []string{"--actuator", "pump", "--token", "9223372036854775807", "fence"}, exitRejected, `"reason":"unsigned"`},
		{"ctl-b's key, signer ctl-a", []string{"--actuator", "pump", "--token", "44", "--key", keyB, "--signer", "ctl-a", "off"}, exitRejected, `"reason":"bad-signature"`},
		{"unknown key", []string{"--actuator", "pump", "--token", "45", "--key", keyX, "--signer", "ctl-x", "off"}, exitRejected, `"reason":"unknown-signer"`},
		{"out of scope", []string{"--actuator", "pump", "--token", "46", "--key", keyB, "--signer", "ctl-b", "off"}, exitRejected, `"reason":"out-of-scope"`},
		{"signed by ctl-b for the heater", []string{"--actuator", "heater", "--token", "7", "--key", keyB, "--signer", "ctl-b", "on"}, 0, `"outcome":"applied"`},
		{"--key without --signer", []string{"--actuator", "pump", "--token", "47", "--key", keyA, "off"}, exitUsage, "--key needs --signer"},
		{"--signer without --key", []string{"--actuator", "pump", "--token", "47", "--signer", "ctl-a", "off"}, exitUsage, "--signer ctl-a needs --key"},
		{"a public key as --key", []string{"--actuator", "pump", "--token", "47", "--key", filepath.Join(dir, "ctl-a.pub"), "--signer", "ctl-a", "off"}, exitUsage, "is a public key"},
	}
	for _, tt := range tests {
		out, code := send(tt.args...)
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("%s: gateway send: exit %d, want %d with %q:\n%s", tt.name, code, tt.code, tt.want, out)
		}
	}

	// A signed command published again unchanged is a redelivery; onto the
	// fan (ctl-a signed it for the pump) it is refused, whatever the scope.
	key, err := sign.ReadPrivateKey(keyA)
	if err != nil {
		t.Fatal(err)
	}
	signed := sign.Sign(key, "ctl-a", gw, fence.Command{ID: testenv.ID(t, "r1"), Actuator: "pump", Fence: fence.Fence{Token: 42, Seq: 1}, State: fence.StateOn})
	if res := ctl.Send(t, signed); res.Outcome != fence.Applied {
		t.Errorf("signed command from package sign: %+v, want applied", res)
	}
	if res := ctl.Send(t, signed); res.Outcome != fence.Duplicate {
		t.Errorf("the same signed command again: %+v, want duplicate", res)
	}
	replay := signed
	replay.Actuator = "fan"
	if res := ctl.Send(t, replay); res.Outcome != fence.Rejected || res.Reason != fence.ReasonBadSignature || res.Fence != (fence.Fence{Token: 7}) {
		t.Errorf("replayed onto the fan: %+v, want rejected bad-signature with the climate fence 7/0", res)
	}
	if m, _ := boards.ReadLatch(latch); !m["GPIO17"] || m["GPIO22"] || !m["GPIO23"] {
		t.Errorf("latch %v: want the pump and the heater on (the applied commands) and the fan off", m)
	}

	// The keys appear nowhere: the gateway never reads them.
	resp, err := http.Get("http://" + httpAddr + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	status, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	places := map[string]string{"the gateway's log": p.output(), "/api/status": string(status), "gateway check": checkOut}
	for _, k := range []string{keyA, keyB} {
		for _, s := range secrets(t, k) {
			for where, text := range places {
				if strings.Contains(text, s) {
					t.Errorf("%s contains a line of the private key %s", where, k)
				}
			}
		}
	}
	if !strings.Contains(p.output(), "unsigned") || !strings.Contains(p.output(), "signed commands") {
		t.Errorf("the gateway's log says nothing of signed commands (is the log checked at all?):\n%s", p.output())
	}
}

// TestKeyPastedIntoConfig: a private key pasted into the configuration
// (bare, or as ed25519:<base64> of its 64 bytes) is refused by check and
// run with the line to fix, and neither prints it.
func TestKeyPastedIntoConfig(t *testing.T) {
	dir := t.TempDir()
	keyPath, _ := keygen(t, dir, "ctl-a")
	pemText, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	key, err := sign.ReadPrivateKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	raw := "ed25519:" + strings.TrimPrefix(sign.FormatPublicKey([]byte(key)), "ed25519:")
	for _, tt := range []struct{ name, value, line string }{
		{"PEM", strings.TrimSpace(string(pemText)), "line 9: a PEM block (PRIVATE KEY)"},
		{"base64", raw, `line 9: controller "ctl-a": public_key: not a public key`},
	} {
		name, value := tt.name, tt.value
		cfg := writeConfigWith(t, t.TempDir(), gatewayID(t), "tcp://127.0.0.1:1", "", "controllers:\n  - name: ctl-a\n    public_key: "+value+
			"\n    scopes: [pump]\nactuators:\n  - {name: pump, pin: GPIO17}\n")
		for _, args := range [][]string{{"check", "--config-only", "--config", cfg}, {"run", "--init", "--config", cfg}} {
			out, code := runCLI(t, args...)
			if code != exitConfig || !strings.Contains(out, tt.line) {
				t.Errorf("%s: gateway %s: exit %d, want %d and the line to fix:\n%s", name, args[0], code, exitConfig, out)
			}
			for _, s := range append(secrets(t, keyPath), raw[8:]) {
				if strings.Contains(out, s) {
					t.Errorf("%s: gateway %s prints the private key:\n%s", name, args[0], out)
					break
				}
			}
		}
	}
}
