package actuator_test

import (
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/actuator"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sign"
)

// TestSignedCommands: a bank that authorizes with a real signature policy
// (ctl-a may command the pump, ctl-b the climate scope; the pump and the
// fan require signatures) applies a signed command, and refuses every
// other one before its fence is read: nothing is recorded, nothing is
// driven, the answer carries the current fence and state, and the refusal
// is audited with its reason.
func TestSignedCommands(t *testing.T) {
	keyA := ed25519.NewKeyFromSeed([]byte(strings.Repeat("a", ed25519.SeedSize)))
	keyB := ed25519.NewKeyFromSeed([]byte(strings.Repeat("b", ed25519.SeedSize)))
	keyX := ed25519.NewKeyFromSeed([]byte(strings.Repeat("x", ed25519.SeedSize)))
	p := &sign.Policy{
		GatewayID: "gw",
		Controllers: []sign.Controller{
			{Name: "ctl-a", Key: keyA.Public().(ed25519.PublicKey), Scopes: []string{"pump"}},
			{Name: "ctl-b", Key: keyB.Public().(ed25519.PublicKey), Scopes: []string{"climate"}},
		},
		Required: map[string]bool{"pump": true, "fan": true},
	}
	r := newRig(t, "", defaultActs, &actuator.Options{Authorize: p.Authorize})

	on := command("a-1", "pump", 42, 0, fence.StateOn)
	signed := sign.Sign(keyA, "ctl-a", "gw", on)
	res := r.send(t, signed, fence.Applied)
	if res.Fence != (fence.Fence{Token: 42}) || !r.level(t, "GPIO17") {
		t.Fatalf("signed command: %+v, pump level %v; want applied at 42/0 and the pump on", res, r.level(t, "GPIO17"))
	}
	r.send(t, signed, fence.Duplicate) // the same signed command again is a redelivery
	if es, _ := r.log.Audit(2); len(es) != 2 || es[0].Outcome != fence.Applied || es[0].Signer != "ctl-a" || es[1].Signer != "ctl-a" {
		t.Errorf("audit of the signed command and its redelivery: %+v, want applied and duplicate, signer ctl-a", es)
	}

	redirect := func(actuator string) fence.Command { c := signed; c.Actuator = actuator; return c }
	changed := func(f func(*fence.Command)) fence.Command { c := signed; f(&c); return c }
	tests := []struct {
		name   string
		c      fence.Command
		reason string
		pin    string // the actuator's pin, which must not move
	}{
		{"replayed onto another actuator", redirect("fan"), fence.ReasonBadSignature, "GPIO22"},
		{"replayed onto an actuator that requires none", redirect("valve"), fence.ReasonBadSignature, "GPIO27"},
		{"replayed onto another gateway", sign.Sign(keyA, "ctl-a", "gw-2", command("a-2", "pump", 43, 0, fence.StateOff)), fence.ReasonBadSignature, "GPIO17"},
		{"token raised", changed(func(c *fence.Command) { c.Fence.Token = fence.MaxToken }), fence.ReasonBadSignature, "GPIO17"},
		{"seq raised", changed(func(c *fence.Command) { c.Fence.Seq = 1; c.State = fence.StateOff }), fence.ReasonBadSignature, "GPIO17"},
		{"state changed", changed(func(c *fence.Command) { c.Fence.Token = 43; c.State = fence.StateOff }), fence.ReasonBadSignature, "GPIO17"},
		{"unknown key", sign.Sign(keyX, "ctl-x", "gw", command("x-1", "pump", 50, 0, fence.StateOff)), fence.ReasonUnknownSigner, "GPIO17"},
		{"out of scope, fence-only to the end of the range", sign.Sign(keyB, "ctl-b", "gw", command("b-1", "pump", fence.MaxToken, 0, fence.StateNone)), fence.ReasonOutOfScope, "GPIO17"},
		{"unsigned", command("u-1", "pump", 60, 0, fence.StateOff), fence.ReasonUnsigned, "GPIO17"},
		{"unsigned fence-only", command("u-2", "fan", fence.MaxToken, 0, fence.StateNone), fence.ReasonUnsigned, "GPIO22"},
	}
	for _, tt := range tests {
		before, _ := r.log.Fences()
		level := r.level(t, tt.pin)
		res := r.send(t, tt.c, fence.Rejected)
		if res.Reason != tt.reason || res.Error == "" {
			t.Errorf("%s: answer %+v, want reason %s with an error text", tt.name, res, tt.reason)
		}
		after, _ := r.log.Fences()
		for scope, f := range after {
			if before[scope] != f {
				t.Errorf("%s: the fence of %s moved from %v to %v", tt.name, scope, before[scope], f)
			}
		}
		if r.level(t, tt.pin) != level {
			t.Errorf("%s: %s moved", tt.name, tt.pin)
		}
		if cur, _ := r.bank.Output(tt.c.Actuator); res.Fence != cur.Fence || res.State != cur.State {
			t.Errorf("%s: answer fence %v state %v, want the current %v %v", tt.name, res.Fence, res.State, cur.Fence, cur.State)
		}
		es, _ := r.log.Audit(1)
		if len(es) != 1 || es[0].Outcome != fence.Rejected || es[0].Reason != tt.reason || es[0].ID != tt.c.ID || es[0].Signer != tt.c.Signer {
			t.Errorf("%s: last audit entry %+v, want rejected %s for %q", tt.name, es, tt.reason, tt.c.ID)
		}
	}

	// ctl-a still commands the pump; ctl-b the climate scope, signed fence-only too.
	r.send(t, sign.Sign(keyA, "ctl-a", "gw", command("a-3", "pump", 42, 1, fence.StateOff)), fence.Applied)
	r.send(t, sign.Sign(keyB, "ctl-b", "gw", command("b-2", "fan", 7, 0, fence.StateNone)), fence.Applied)
	r.send(t, sign.Sign(keyB, "ctl-b", "gw", command("b-3", "heater", 7, 1, fence.StateOn)), fence.Applied)
	if r.level(t, "GPIO17") || !r.level(t, "GPIO23") {
		t.Errorf("pump %v, heater %v; want off and on", r.level(t, "GPIO17"), r.level(t, "GPIO23"))
	}
}
