package sign_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sign"
)

// keyOf returns a fixed key for name, so that failures reproduce.
func keyOf(name string) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, name)
	return ed25519.NewKeyFromSeed(seed)
}

func pubOf(name string) ed25519.PublicKey { return keyOf(name).Public().(ed25519.PublicKey) }

// policy is the gateway gw with controllers ctl-a (scopes pump and
// climate) and ctl-b (scope vent); the fan requires signatures.
func policy() *sign.Policy {
	return &sign.Policy{
		GatewayID: "gw",
		Controllers: []sign.Controller{
			{Name: "ctl-a", Key: pubOf("ctl-a"), Scopes: []string{"pump", "climate"}},
			{Name: "ctl-b", Key: pubOf("ctl-b"), Scopes: []string{"vent"}},
		},
		Required: map[string]bool{"fan": true},
	}
}

// TestAuthorize: each defence of a signed command, one case each. The
// replays and changed fields are a command ctl-a signed for the pump of
// gateway gw, then sent elsewhere or changed on the way.
func TestAuthorize(t *testing.T) {
	on := fence.Command{ID: "a-1", Holder: "ctl-a", Actuator: "pump", Fence: fence.Fence{Token: 42, Seq: 1}, State: fence.StateOn}
	signed := sign.Sign(keyOf("ctl-a"), "ctl-a", "gw", on)
	change := func(f func(*fence.Command)) fence.Command {
		c := signed
		c.Sig = bytes.Clone(signed.Sig)
		f(&c)
		return c
	}
	tests := []struct {
		name    string
		gateway string // the verifying gateway; "" means gw
		c       fence.Command
		scope   string
		reason  string // "" for authorized
		errText string
	}{
		{"signed, in scope", "", signed, "pump", "", ""},
		{"signed fence-only", "", sign.Sign(keyOf("ctl-a"), "ctl-a", "gw", fence.Command{Actuator: "fan", Fence: fence.Fence{Token: 9}}), "climate", "", ""},
		{"signed where not required", "", sign.Sign(keyOf("ctl-b"), "ctl-b", "gw", fence.Command{Actuator: "vent-open", Fence: fence.Fence{Token: 3}, State: fence.StateOn}), "vent", "", ""},
		{"unsigned where not required", "", on, "pump", "", ""},

		{"replayed onto another actuator", "", change(func(c *fence.Command) { c.Actuator = "fan" }), "climate", fence.ReasonBadSignature, "does not verify with the key of controller ctl-a"},
		{"replayed onto another gateway", "gw-2", signed, "pump", fence.ReasonBadSignature, "on gateway gw-2"},
		{"token changed", "", change(func(c *fence.Command) { c.Fence.Token = fence.MaxToken }), "pump", fence.ReasonBadSignature, ""},
		{"seq changed", "", change(func(c *fence.Command) { c.Fence.Seq = 2 }), "pump", fence.ReasonBadSignature, ""},
		{"state changed", "", change(func(c *fence.Command) { c.State = fence.StateOff }), "pump", fence.ReasonBadSignature, ""},
		{"state changed to fence-only", "", change(func(c *fence.Command) { c.State = fence.StateNone }), "pump", fence.ReasonBadSignature, ""},
		{"id changed", "", change(func(c *fence.Command) { c.ID = "a-2" }), "pump", fence.ReasonBadSignature, ""},
		{"holder changed", "", change(func(c *fence.Command) { c.Holder = "mallory" }), "pump", fence.ReasonBadSignature, ""},
		{"signature bit flipped", "", change(func(c *fence.Command) { c.Sig[10] ^= 1 }), "pump", fence.ReasonBadSignature, ""},
		{"signature cut short", "", change(func(c *fence.Command) { c.Sig = c.Sig[:63] }), "pump", fence.ReasonBadSignature, ""},
		{"signed with another controller's key", "", sign.Sign(keyOf("ctl-b"), "ctl-a", "gw", on), "pump", fence.ReasonBadSignature, ""},
		{"bad signature where none is required", "", change(func(c *fence.Command) { c.Holder = "x" }), "pump", fence.ReasonBadSignature, ""},

		{"unknown key", "", sign.Sign(keyOf("mallory"), "mallory", "gw", on), "pump", fence.ReasonUnknownSigner, `signer "mallory" is not a controller of gateway gw`},
		{"sig without signer", "", change(func(c *fence.Command) { c.Signer = "" }), "pump", fence.ReasonUnknownSigner, "no signer"},
		{"signer without sig", "", change(func(c *fence.Command) { c.Sig = nil }), "pump", fence.ReasonBadSignature, ""},

		{"out of scope", "", sign.Sign(keyOf("ctl-b"), "ctl-b", "gw", fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 50}, State: fence.StateOn}), "pump", fence.ReasonOutOfScope,
			"controller ctl-b may command the scopes vent, and actuator pump is in scope pump"},
		{"out of scope, fence-only", "", sign.Sign(keyOf("ctl-b"), "ctl-b", "gw", fence.Command{Actuator: "fan", Fence: fence.Fence{Token: fence.MaxToken}}), "climate", fence.ReasonOutOfScope, ""},

		{"unsigned where required", "", fence.Command{ID: "u-1", Actuator: "fan", Fence: fence.Fence{Token: 5}, State: fence.StateOn}, "climate", fence.ReasonUnsigned, "actuator fan takes signed commands only"},
		{"unsigned fence-only where required", "", fence.Command{Actuator: "fan", Fence: fence.Fence{Token: fence.MaxToken}}, "climate", fence.ReasonUnsigned, ""},
	}
	for _, tt := range tests {
		p := policy()
		if tt.gateway != "" {
			p.GatewayID = tt.gateway
		}
		reason, err := p.Authorize(tt.c, tt.scope)
		if reason != tt.reason || (err == nil) != (tt.reason == "") {
			t.Errorf("%s: Authorize = %q, %v; want %q", tt.name, reason, err, tt.reason)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), tt.errText) {
			t.Errorf("%s: Authorize error = %q, want it to contain %q", tt.name, err, tt.errText)
		}
	}
}

// TestCanonicalFields: every field changes the bytes, and the lengths keep
// neighbouring fields apart (no "ab"+"" == "a"+"b").
func TestCanonicalFields(t *testing.T) {
	base := fence.Command{ID: "ab", Holder: "", Actuator: "pump", Fence: fence.Fence{Token: 1, Seq: 2}, State: fence.StateOn}
	want := sign.Canonical("gw", base)
	if !bytes.HasPrefix(want, []byte(sign.Magic)) {
		t.Fatalf("Canonical = %q, want it to start with %q", want, sign.Magic)
	}
	variants := map[string]func() []byte{
		"gateway":              func() []byte { return sign.Canonical("gx", base) },
		"gateway/actuator cut": func() []byte { c := base; c.Actuator = "wpump"; return sign.Canonical("g", c) },
		"actuator":             func() []byte { c := base; c.Actuator = "fan"; return sign.Canonical("gw", c) },
		"token":                func() []byte { c := base; c.Fence.Token = 2; return sign.Canonical("gw", c) },
		"seq":                  func() []byte { c := base; c.Fence.Seq = 1; return sign.Canonical("gw", c) },
		"token and seq swapped": func() []byte {
			c := base
			c.Fence = fence.Fence{Token: 2, Seq: 1}
			return sign.Canonical("gw", c)
		},
		"state":         func() []byte { c := base; c.State = fence.StateOff; return sign.Canonical("gw", c) },
		"fence-only":    func() []byte { c := base; c.State = fence.StateNone; return sign.Canonical("gw", c) },
		"id":            func() []byte { c := base; c.ID = "ac"; return sign.Canonical("gw", c) },
		"id/holder cut": func() []byte { c := base; c.ID, c.Holder = "a", "b"; return sign.Canonical("gw", c) },
		"holder":        func() []byte { c := base; c.Holder = "h"; return sign.Canonical("gw", c) },
		"pulse":         func() []byte { c := base; c.Pulse = 500 * time.Millisecond; return sign.Canonical("gw", c) },
		"reset":         func() []byte { c := base; c.Reset = true; return sign.Canonical("gw", c) },
	}
	p1, p2 := base, base
	p1.Pulse, p2.Pulse = 500*time.Millisecond, 501*time.Millisecond
	if bytes.Equal(sign.Canonical("gw", p1), sign.Canonical("gw", p2)) {
		t.Error("two pulse widths have the same canonical bytes: a signed pulse's width could be changed")
	}
	for name, f := range variants {
		if got := f(); bytes.Equal(got, want) {
			t.Errorf("%s: the canonical bytes do not change: %x", name, got)
		}
	}
	signed := base
	signed.Signer, signed.Sig = "ctl-a", make([]byte, 64)
	if !bytes.Equal(sign.Canonical("gw", signed), want) {
		t.Error("Signer and Sig change the canonical bytes; a signature cannot cover itself")
	}
}

func TestParsePublicKey(t *testing.T) {
	pub := pubOf("ctl-a")
	text := sign.FormatPublicKey(pub)
	if got, err := sign.ParsePublicKey("  " + text + "\n"); err != nil || !got.Equal(pub) {
		t.Errorf("ParsePublicKey(%q) = %x, %v, want %x", text, got, err, pub)
	}
	b64 := strings.TrimPrefix(text, sign.KeyPrefix)
	secret := base64.StdEncoding.EncodeToString(keyOf("ctl-a")) // seed and public key, 64 bytes
	tests := []struct{ in, want string }{
		{"", `does not start with "ed25519:"`},
		{b64, `does not start with "ed25519:"`},
		{"ED25519:" + b64, `does not start with`},
		{"ed25519:" + strings.TrimRight(b64, "="), "not standard base64 with padding"},
		{"ed25519:" + strings.NewReplacer("+", "-", "/", "_").Replace(b64), "not standard base64"},
		{"ed25519:" + b64[:20] + "\n" + b64[20:], "not standard base64"},
		{"ed25519:" + base64.StdEncoding.EncodeToString(pub[:31]), "holds 31 bytes, not 32"},
		{"ed25519:" + secret, "holds 64 bytes, not 32; is it a private key?"},
		{secret, "does not start with"},
	}
	for _, tt := range tests {
		_, err := sign.ParsePublicKey(tt.in)
		if err == nil || !errors.Is(err, sign.ErrPublicKey) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParsePublicKey(%q) = %v, want ErrPublicKey containing %q", tt.in, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), secret) || (len(tt.in) > 8 && strings.Contains(err.Error(), tt.in[8:])) {
			t.Errorf("ParsePublicKey(%q) error repeats the value: %v", tt.in, err)
		}
	}
}

func TestKeyPair(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctl-a")
	pub, err := sign.WriteKeyPair(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sign.KeyFile(path))
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", sign.KeyFile(path), fi.Mode().Perm())
	}
	pubText, err := os.ReadFile(sign.PubFile(path))
	if err != nil {
		t.Fatal(err)
	}
	if want := sign.FormatPublicKey(pub) + "\n"; string(pubText) != want {
		t.Errorf("%s = %q, want %q", sign.PubFile(path), pubText, want)
	}
	key, err := sign.ReadPrivateKey(sign.KeyFile(path))
	if err != nil {
		t.Fatal(err)
	}
	if !key.Public().(ed25519.PublicKey).Equal(pub) {
		t.Error("the private key read back does not match the public key written")
	}
	c := sign.Sign(key, "ctl-a", "gw", fence.Command{Actuator: "pump", Fence: fence.Fence{Token: 1}})
	if !sign.Verify(pub, "gw", c) {
		t.Error("a command signed with the key read back does not verify with the public key")
	}

	// Never overwritten: neither file, even when only one exists.
	before, _ := os.ReadFile(sign.KeyFile(path))
	if _, err := sign.WriteKeyPair(path, nil); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("WriteKeyPair over an existing pair = %v, want an error saying it exists", err)
	}
	if after, _ := os.ReadFile(sign.KeyFile(path)); !bytes.Equal(before, after) {
		t.Error("WriteKeyPair changed an existing private key")
	}
	other := filepath.Join(t.TempDir(), "ctl-b")
	os.WriteFile(sign.PubFile(other), []byte("mine\n"), 0o644)
	if _, err := sign.WriteKeyPair(other, nil); err == nil {
		t.Error("WriteKeyPair with an existing PATH.pub succeeded")
	}
	if _, err := os.Stat(sign.KeyFile(other)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WriteKeyPair refused PATH.pub but left PATH.key: %v", err)
	}
}

// TestReadPrivateKeyErrors: a wrong file is named and explained, and its
// contents never appear in the error.
func TestReadPrivateKeyErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	secret := "c2VjcmV0LXNlY3JldC1zZWNyZXQ"
	der, err := x509.MarshalPKCS8PrivateKey(keyOf("ctl-a"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{"missing", filepath.Join(dir, "nope.key"), "no such file"},
		{"public key", write("pub", []byte(sign.FormatPublicKey(pubOf("x"))+"\n")), "is a public key"},
		{"not PEM", write("text", []byte(secret)), "is not a PEM file"},
		{"other PEM type", write("rsa", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: []byte(secret)})), `holds a PEM "RSA PRIVATE KEY"`},
		{"damaged PKCS#8", write("bad", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: append([]byte(secret), der[:10]...)})), "not a PKCS#8 private key"},
	}
	for _, tt := range tests {
		_, err := sign.ReadPrivateKey(tt.path)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: ReadPrivateKey = %v, want an error containing %q", tt.name, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), base64.StdEncoding.EncodeToString(der)[:20]) {
			t.Errorf("%s: ReadPrivateKey error repeats the file's contents: %v", tt.name, err)
		}
	}
}
