package sign_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sign"
	"github.com/fencegate/fencegate/wire"
)

// vector is one test vector of docs/protocol.md, its fields as written.
type vector struct {
	title  string
	fields map[string]string
}

// readVectors reads the test vectors of docs/protocol.md: the text blocks
// under "### Test vectors", each a list of "key: value" lines, where
// "canonical:" is followed by indented lines of hex with # comments.
func readVectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n### Test vectors\n")
	if !ok {
		t.Fatal(`docs/protocol.md has no "### Test vectors" section`)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	var out []vector
	var cur *vector
	var in bool
	var last string
	for n, line := range strings.Split(sec, "\n") {
		switch {
		case strings.HasPrefix(line, "#### "):
			out = append(out, vector{title: strings.TrimPrefix(line, "#### "), fields: map[string]string{}})
			cur = &out[len(out)-1]
		case line == "```text" && cur != nil:
			in = true
		case line == "```":
			in = false
		case !in:
		case strings.HasPrefix(line, " "):
			hexPart, _, _ := strings.Cut(line, "#")
			cur.fields[last] += strings.Join(strings.Fields(hexPart), "")
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				t.Fatalf("docs/protocol.md test vectors, line %d of the section: %q is not \"key: value\"", n+1, line)
			}
			v = strings.TrimSpace(v)
			if v == "(empty)" {
				v = ""
			}
			cur.fields[k] = v
			last = k
		}
	}
	return out
}

// TestVectors checks the test vectors of docs/protocol.md against this
// package and package wire, so that the document cannot drift from the
// code: the public key from the seed, the canonical bytes from the fields,
// the signature (Ed25519 is deterministic), and the payload on the wire.
func TestVectors(t *testing.T) {
	vs := readVectors(t)
	if len(vs) < 3 {
		t.Fatalf("docs/protocol.md has %d test vectors, want at least 3", len(vs))
	}
	var fenceOnly, nonASCII, setpoint bool
	for _, v := range vs {
		f := v.fields
		for _, k := range []string{"seed", "public_key", "gateway", "actuator", "token", "seq", "state", "id", "holder", "signer", "canonical", "sig", "payload"} {
			if _, ok := f[k]; !ok {
				t.Fatalf("vector %q: no %s", v.title, k)
			}
		}
		seed, err := hex.DecodeString(f["seed"])
		if err != nil || len(seed) != ed25519.SeedSize {
			t.Fatalf("vector %q: seed %q is not %d bytes of hex", v.title, f["seed"], ed25519.SeedSize)
		}
		key := ed25519.NewKeyFromSeed(seed)
		pub := key.Public().(ed25519.PublicKey)
		if got := sign.FormatPublicKey(pub); got != f["public_key"] {
			t.Errorf("vector %q: public_key of the seed is %s, the document says %s", v.title, got, f["public_key"])
		}
		if parsed, err := sign.ParsePublicKey(f["public_key"]); err != nil || !parsed.Equal(pub) {
			t.Errorf("vector %q: ParsePublicKey(%s) = %x, %v", v.title, f["public_key"], parsed, err)
		}
		token, err1 := strconv.ParseUint(f["token"], 10, 64)
		seq, err2 := strconv.ParseUint(f["seq"], 10, 64)
		var state fence.State
		var err3 error
		var duty fence.Duty
		d, isSetpoint := f["duty"]
		if isSetpoint {
			// A set-point signs the state "duty" and its duty.
			if duty, err3 = fence.ParseDuty(d); err3 == nil && f["state"] != "duty" {
				err3 = fmt.Errorf("a set-point's state is duty, not %q", f["state"])
			}
			state = duty.State()
		} else {
			err3 = state.UnmarshalText([]byte(f["state"]))
		}
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("vector %q: token %q, seq %q, state %q: %v %v %v", v.title, f["token"], f["seq"], f["state"], err1, err2, err3)
		}
		c := fence.Command{ID: f["id"], Holder: f["holder"], Actuator: f["actuator"], Fence: fence.Fence{Token: token, Seq: seq}, State: state,
			Setpoint: isSetpoint, Duty: duty}

		canon := sign.Canonical(f["gateway"], c)
		if got := hex.EncodeToString(canon); got != f["canonical"] {
			t.Errorf("vector %q: canonical bytes\n got  %s\n want %s (the document)", v.title, got, f["canonical"])
		}
		sig := ed25519.Sign(key, canon)
		if got := base64.StdEncoding.EncodeToString(sig); got != f["sig"] {
			t.Errorf("vector %q: signature\n got  %s\n want %s (the document)", v.title, got, f["sig"])
		}
		signed := sign.Sign(key, f["signer"], f["gateway"], c)
		if !bytes.Equal(signed.Sig, sig) || signed.Signer != f["signer"] {
			t.Errorf("vector %q: Sign = %s %x, want %s %x", v.title, signed.Signer, signed.Sig, f["signer"], sig)
		}
		if !sign.Verify(pub, f["gateway"], signed) {
			t.Errorf("vector %q: Verify(Sign(...)) = false", v.title)
		}

		if got := string(wire.EncodeCommand(signed)); got != f["payload"] {
			t.Errorf("vector %q: payload\n got  %s\n want %s (the document)", v.title, got, f["payload"])
		}
		decoded, err := wire.DecodeCommand(f["actuator"], []byte(f["payload"]))
		if err != nil || !decoded.Equal(signed) {
			t.Errorf("vector %q: DecodeCommand(payload) = %+v, %v, want %+v", v.title, decoded, err, signed)
		}
		policy := &sign.Policy{GatewayID: f["gateway"], Controllers: []sign.Controller{{Name: f["signer"], Key: pub, Scopes: []string{"s"}}}}
		if reason, err := policy.Authorize(decoded, "s"); err != nil {
			t.Errorf("vector %q: Authorize(payload) = %s, %v, want it authorized", v.title, reason, err)
		}

		fenceOnly = fenceOnly || (state == fence.StateNone && c.ID == "" && c.Holder == "")
		setpoint = setpoint || c.Setpoint
		nonASCII = nonASCII || strings.IndexFunc(c.Holder, func(r rune) bool { return r >= utf8.RuneSelf }) >= 0
	}
	if !fenceOnly || !nonASCII || !setpoint {
		t.Errorf("the vectors lack a fence-only command without id and holder (%v), a non-ASCII holder (%v) or a set-point (%v)", fenceOnly, nonASCII, setpoint)
	}
}
