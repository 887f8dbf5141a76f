package sign_test

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sign"
	"github.com/fencegate/fencegate/wire"
)

// A pulse command as protocol.md shows it (pulse_ms, no state), signed
// by a controller, must verify at the gateway.
func TestSignedPulseWithoutState(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(nil)
	c := fence.Command{ID: "open-7", Actuator: "door", Fence: fence.Fence{Token: 42, Seq: 3}, Pulse: 500 * time.Millisecond}
	s := sign.Sign(key, "ctl-a", "gw", c)
	got, err := wire.DecodeCommand("door", wire.EncodeCommand(s))
	if err != nil {
		t.Fatal(err)
	}
	if !sign.Verify(pub, "gw", got) {
		t.Errorf("a signed pulse_ms command without state fails verification at the gateway (decoded state %v)", got.State)
	}
}
