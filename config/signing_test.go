package config

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sign"
)

// testKey is a fixed key pair for the configurations below.
var testKey = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))

var testPub = sign.FormatPublicKey(testKey.Public().(ed25519.PublicKey))

// signingBase has the actuators pump (scope pump), fan and heater (scope
// climate); fan requires signed commands. A controllers: key appended
// is at line 10, its first item at line 11.
const signingBase = base + `actuators:
  - {name: pump, pin: GPIO17}
  - {name: fan, pin: GPIO22, scope: climate, require_signature: true}
  - {name: heater, pin: GPIO23, scope: climate}
`

func TestSigningConfig(t *testing.T) {
	other := sign.FormatPublicKey(ed25519.NewKeyFromSeed([]byte(strings.Repeat("b", 32))).Public().(ed25519.PublicKey))
	c, err := Parse([]byte(signingBase + `controllers:
  - name: ctl-a
    public_key: "` + testPub + `"
    scopes: [pump, climate]
  - name: ctl-b
    public_key: "` + other + `"
    scopes: [climate]
`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.SignPolicy()
	if p.GatewayID != "gw" || len(p.Controllers) != 2 || p.Controllers[0].Name != "ctl-a" || !p.Controllers[0].Key.Equal(testKey.Public()) {
		t.Errorf("SignPolicy() = %+v", p)
	}
	if !p.Required["fan"] || p.Required["pump"] || p.Required["heater"] {
		t.Errorf("SignPolicy().Required = %v, want only fan", p.Required)
	}
	signed := sign.Sign(testKey, "ctl-a", "gw", fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 1}, State: fence.StateOn})
	if reason, err := p.Authorize(signed, "pump"); err != nil {
		t.Errorf("a command signed by ctl-a for the pump: %s, %v", reason, err)
	}
	if got, want := c.Signing(), "2 controllers: ctl-a (scopes pump, climate); ctl-b (scopes climate); signed commands required by fan"; got != want {
		t.Errorf("Signing() = %q, want %q", got, want)
	}

	global, err := Parse([]byte("require_signature: true\n" + signingBase + "controllers:\n  - {name: ctl-a, public_key: \"" + testPub + "\", scopes: [pump]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := global.SignPolicy().Required; !r["pump"] || !r["fan"] || !r["heater"] {
		t.Errorf("require_signature: true at the top: Required = %v, want every actuator", r)
	}
	if got := global.Signing(); !strings.HasSuffix(got, "; every actuator requires signed commands") || strings.Contains(got, testPub) {
		t.Errorf("Signing() = %q", got)
	}
}

func TestSigningConfigErrors(t *testing.T) {
	privB64 := base64.StdEncoding.EncodeToString(testKey) // 64 bytes: seed and public key
	der, err := x509.MarshalPKCS8PrivateKey(testKey)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	pemBody := strings.Split(pemKey, "\n")[1]
	indent := func(s, by string) string { return by + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+by) }
	ctl := func(name, key, scopes string) string {
		return "  - name: " + name + "\n    public_key: " + key + "\n    scopes: " + scopes + "\n"
	}
	tests := []struct {
		name   string
		yaml   string
		want   []string // fragments of the error
		secret string   // must not appear in the error
	}{
		{"require_signature without controllers", "require_signature: true\n" + signingBase,
			[]string{"line 1: require_signature is true but no controllers are configured: nothing could ever be applied"}, ""},
		{"actuator's require_signature without controllers", signingBase,
			[]string{`line 8: actuator "fan": require_signature is true but no controllers are configured`}, ""},
		{"scope no actuator uses", signingBase + "controllers:\n" + ctl("ctl-a", testPub, "[pump, climat]"),
			[]string{`line 13: controller "ctl-a": scopes: no actuator is in scope "climat" (probably a typo; the scopes are pump, climate)`}, ""},
		{"no scopes", signingBase + "controllers:\n" + ctl("ctl-a", testPub, "[]"),
			[]string{`line 13: controller "ctl-a": scopes: name at least one fence scope`}, ""},
		{"duplicate name", signingBase + "controllers:\n" + ctl("ctl-a", testPub, "[pump]") + ctl("ctl-a", `"ed25519:`+base64.StdEncoding.EncodeToString(make([]byte, 32))+`"`, "[pump]"),
			[]string{`line 14: controller "ctl-a": name is already used at line 11`}, ""},
		{"bad name", signingBase + "controllers:\n" + ctl(`"ctl a"`, testPub, "[pump]"),
			[]string{`line 11: controller "ctl a": name: use letters, digits, - and _ only`}, ""},
		{"missing name", signingBase + "controllers:\n  - {public_key: " + testPub + ", scopes: [pump]}\n",
			[]string{`line 11: controller "": name is required`}, ""},
		{"same key twice", signingBase + "controllers:\n" + ctl("ctl-a", testPub, "[pump]") + ctl("ctl-b", testPub, "[pump]"),
			[]string{`line 15: controller "ctl-b": public_key is the same as controller "ctl-a"'s`}, ""},
		{"missing public_key", signingBase + "controllers:\n  - {name: ctl-a, scopes: [pump]}\n",
			[]string{`line 11: controller "ctl-a": public_key is required`}, ""},
		{"public_key without prefix", signingBase + "controllers:\n" + ctl("ctl-a", strings.TrimPrefix(testPub, "ed25519:"), "[pump]"),
			[]string{`line 12: controller "ctl-a": public_key: not a public key: want ed25519:<base64 of 32 bytes>, as gateway keygen writes it in PATH.pub`}, strings.TrimPrefix(testPub, "ed25519:")},
		{"private key as public_key", signingBase + "controllers:\n" + ctl("ctl-a", "ed25519:"+privB64, "[pump]"),
			[]string{`line 12: controller "ctl-a": public_key: not a public key`, "is it a private key?"}, privB64},
		{"private key without prefix", signingBase + "controllers:\n" + ctl("ctl-a", privB64, "[pump]"),
			[]string{`line 12: controller "ctl-a": public_key: not a public key`}, privB64},
		{"PEM private key in a block scalar", signingBase + "controllers:\n" + ctl("ctl-a", "|\n"+indent(pemKey, "      "), "[pump]"),
			[]string{"line 13: a PEM block (PRIVATE KEY) is pasted here", "a private key never belongs on the gateway"}, pemBody},
		{"PEM private key pasted bare", signingBase + "controllers:\n" + ctl("ctl-a", indent(pemKey, ""), "[pump]"),
			[]string{"line 12: a PEM block (PRIVATE KEY) is pasted here"}, pemBody},
		{"public_key of the wrong shape", signingBase + "controllers:\n" + ctl("ctl-a", "[a, b]", "[pump]"),
			[]string{`line 12: public_key in controller "ctl-a" must be a single value`}, ""},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.yaml))
		if err == nil {
			t.Errorf("%s: Parse = nil, want an error", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Parse error\n%v\nwant it to contain %q", tt.name, err, w)
			}
		}
		if tt.secret != "" && strings.Contains(err.Error(), tt.secret) {
			t.Errorf("%s: Parse error repeats the key:\n%v", tt.name, err)
		}
		if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
			t.Errorf("%s: Parse reports %d problems, want 1:\n%v", tt.name, n, err)
		}
	}
}
